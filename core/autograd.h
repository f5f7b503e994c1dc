// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// Reverse-mode autograd: a graph of Nodes joined by Edges (PyTorch's design).
///
/// Each op that records history creates one Node whose backward maps the
/// gradients of its outputs to the gradients of its inputs. The engine runs
/// nodes in dependency order, so gradients that meet at one input are summed
/// before they flow on (b = a + a gives a.grad = 2).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tensor.h"

namespace remora {

/// An edge points at input `input_nr` of node `fn` (null fn: no gradient needed).
struct Edge {
  /// The node that receives the gradient (null: none is needed).
  std::shared_ptr<Node> fn;
  /// Which of fn's outputs the gradient belongs to (its slot in fn's apply()).
  int input_nr = 0;
};

/// Shape/dtype/device of an output, to build zero gradients and check shapes.
struct TensorMeta {
  Shape shape;    ///< the output's shape
  DType dtype;    ///< the output's dtype
  Device device;  ///< the output's device
};

/// One recorded op in the autograd graph: maps the gradients of the op's
/// outputs to the gradients of its inputs. Subclass it (or use FunctionNode
/// through record()) to add an op with a hand-written backward.
class Node {
 public:
  /// Frees the nodes only this one keeps alive iteratively, so dropping a very
  /// deep graph (a long recurrence) does not overflow the stack.
  virtual ~Node();
  /// grads[k] is the gradient of output k (undefined means zero). Returns one
  /// gradient per entry of `next` (undefined where no gradient flows), or an
  /// empty vector when no gradient flows at all. Runs with grad mode off.
  virtual std::vector<Tensor> apply(std::vector<Tensor>& grads) = 0;
  /// The op's name, for error messages ("matmul", ...).
  virtual std::string name() const = 0;
  /// Frees saved tensors after a backward without retain_graph.
  virtual void release() {}

  std::vector<Edge> next;             ///< one per differentiable input
  std::vector<TensorMeta> out_meta;  ///< one per output
  /// False: an output that got no gradient reaches apply() as zeros of its
  /// shape. True: as an undefined tensor (set by nodes whose backward reads
  /// undefined as zero without materialising it; record_optional_grads).
  bool undefined_grads_ok = false;
};

/// The backward of a FunctionNode: given the gradients of the node's outputs
/// (grads[k] for output k), returns one gradient per input, in order
/// (undefined where none flows). Releasing the node drops the closure and
/// with it the tensors it captured. Never capture an output of the node itself (that is a
/// reference cycle): capture output.detach() instead.
using BackwardFn = std::function<std::vector<Tensor>(std::vector<Tensor>& grads)>;

/// A node whose backward is a BackwardFn closure (what record() creates).
/// release() drops the closure and the tensors it captured; running it again
/// afterwards is an Error that suggests retain_graph=true.
class FunctionNode : public Node {
 public:
  /// A node called name whose backward is fn.
  FunctionNode(std::string name, BackwardFn fn) : name_(std::move(name)), fn_(std::move(fn)) {}
  /// Calls the closure; an Error when it was released by an earlier backward.
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override;
  /// The name given at construction.
  std::string name() const override { return name_; }
  /// Drops the closure and what it captured.
  void release() override { fn_ = nullptr; }

 private:
  std::string name_;
  BackwardFn fn_;
};

/// Whether ops record history (thread-local; on by default).
struct GradMode {
  /// Whether the calling thread records history.
  static bool is_enabled();
  /// Turns recording on or off for the calling thread (prefer the guards below,
  /// which restore the previous mode).
  static void set_enabled(bool on);
};

/// Disables history recording in its scope (like torch::NoGradGuard),
/// restoring the previous mode on exit.
class NoGradGuard {
 public:
  NoGradGuard() : prev_(GradMode::is_enabled()) { GradMode::set_enabled(false); }
  ~NoGradGuard() { GradMode::set_enabled(prev_); }

 private:
  bool prev_;
};

/// Sets grad mode to `enabled` in its scope (like torch::AutoGradMode):
/// AutoGradMode(false) is NoGradGuard, AutoGradMode(true) re-enables recording
/// inside a NoGradGuard. Restores the previous mode on exit; not copyable.
class AutoGradMode {
 public:
  /// Saves the calling thread's grad mode and sets it to enabled.
  explicit AutoGradMode(bool enabled) : prev_(GradMode::is_enabled()) { GradMode::set_enabled(enabled); }
  ~AutoGradMode() { GradMode::set_enabled(prev_); }
  AutoGradMode(const AutoGradMode&) = delete;
  AutoGradMode& operator=(const AutoGradMode&) = delete;

 private:
  bool prev_;
};

/// torch::InferenceMode: no history is recorded in its scope (here the same
/// as NoGradGuard: Remora keeps no version counters, so tensors made inside
/// stay usable outside, where libtorch forbids some uses). InferenceMode(false)
/// leaves grad mode as it is.
class InferenceMode {
 public:
  /// Turns recording off for the scope when enabled (restored on exit).
  explicit InferenceMode(bool enabled = true) : prev_(GradMode::is_enabled()) {
    if (enabled) GradMode::set_enabled(false);
  }
  ~InferenceMode() { GradMode::set_enabled(prev_); }
  InferenceMode(const InferenceMode&) = delete;
  InferenceMode& operator=(const InferenceMode&) = delete;
  /// True when the calling thread records no history (grad mode is off).
  static bool is_enabled() { return !GradMode::is_enabled(); }

 private:
  bool prev_;
};

/// Runs backward from several roots at once: grads[i] is the gradient of
/// roots[i] (same shape and dtype; undefined allowed for a one-element root,
/// which gets 1). Every root must require grad. Gradients that meet are summed
/// before they flow on, and leaves accumulate into grad(). Without
/// retain_graph the graph's saved tensors are freed as it runs, so a second
/// backward through it is an Error. A size mismatch between roots and grads is
/// an Error.
void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads,
              bool retain_graph = false);

/// \name For op authors
/// Recording a hand-written backward: compute the outputs without history,
/// then record() them with a closure that maps output gradients to input
/// gradients.
/// @{
//
/// True when grad mode is on and any of the (defined) inputs requires grad.
bool any_requires_grad(std::initializer_list<Tensor> inputs);
/// True when grad mode is on and any of the (defined) inputs requires grad.
bool any_requires_grad(const std::vector<Tensor>& inputs);
/// Attaches a FunctionNode to `outputs` when any input requires grad. fn returns
/// one gradient per input, in order. Returns outputs (with history; outputs of
/// integer dtypes get none).
std::vector<Tensor> record(const char* name, const std::vector<Tensor>& inputs,
                           std::vector<Tensor> outputs, BackwardFn fn);
/// record() for one output: fn gets grads[0], its gradient.
Tensor record(const char* name, const std::vector<Tensor>& inputs, Tensor output,
              BackwardFn fn);
/// As record, for a backward that takes an undefined gradient of an output the
/// loss does not reach as zero itself (Node::undefined_grads_ok): the engine
/// then allocates and fills no zeros for it.
std::vector<Tensor> record_optional_grads(const char* name, const std::vector<Tensor>& inputs,
                                          std::vector<Tensor> outputs, BackwardFn fn);
/// Edge along which a gradient for t flows (empty when t needs none): t's
/// grad_fn for a non-leaf, the leaf's accumulator for a leaf that requires grad.
Edge gradient_edge(const Tensor& t);
/// @}

}  // namespace remora
