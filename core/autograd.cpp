// SPDX-License-Identifier: BSD-3-Clause
// The autograd engine: dependency counting over the graph reachable from the
// roots, then a ready-queue walk that sums gradients meeting at one input
// before the node that produced it runs.
#include "autograd.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "grad_hooks.h"
#include "strided.h"
#include "tensor_impl.h"

namespace remora {

namespace {
thread_local bool g_grad_enabled = true;

// Gradient-accumulated hooks (grad_hooks.h), keyed by the leaf's TensorImpl.
// An entry holds the leaf weakly, so a dead leaf whose address is reused never
// runs another tensor's hook.
struct GradHookEntry {
  uint64_t id;
  std::weak_ptr<TensorImpl> leaf;
  GradAccumulatedHook fn;
};
std::mutex g_hooks_mu;
std::unordered_map<TensorImpl*, std::vector<GradHookEntry>> g_hooks;
std::unordered_map<uint64_t, TensorImpl*> g_hook_owner;
std::atomic<size_t> g_num_hooks{0};
uint64_t g_next_hook_id = 1;

void run_grad_accumulated_hooks(const std::shared_ptr<TensorImpl>& leaf) {
  if (g_num_hooks.load(std::memory_order_relaxed) == 0) return;  // the common case
  std::vector<GradAccumulatedHook> fns;
  {
    std::lock_guard<std::mutex> lock(g_hooks_mu);
    auto it = g_hooks.find(leaf.get());
    if (it == g_hooks.end()) return;
    for (const GradHookEntry& e : it->second)
      if (e.leaf.lock() == leaf) fns.push_back(e.fn);
  }
  Tensor handle(leaf);
  for (const GradAccumulatedHook& fn : fns) fn(handle);  // outside the lock: hooks may (un)register
}

// True when nothing but `g` can reach its memory: the only handle on its
// TensorImpl, the only view of its storage, and the whole of that storage
// (contiguous from offset 0, so keeping it pins nothing more). Such a gradient
// becomes the leaf's .grad as it is, as PyTorch's AccumulateGrad steals an
// unshared gradient; any other is copied, since it may alias a buffer the
// graph or the caller still uses (an op whose backward passes its incoming
// gradient through, a view, the root gradient the caller passed).
bool sole_owner(const Tensor& g) {
  const TensorImpl* t = g.impl();
  return g.impl_ptr().use_count() == 1 && t->storage.use_count() == 1 && t->offset == 0 &&
         !t->requires_grad && !t->grad_fn && g.is_contiguous() &&
         t->storage->nbytes == size_t(g.numel()) * dtype_size(t->dtype);
}

// A new tensor of `value` everywhere: the root gradient of a scalar output and
// the zero gradient of an output nothing reached.
Tensor filled(const Shape& shape, double value, DType dt, Device dev) {
  Tensor t = make_tensor(shape, dt, dev);
  backend(dev).fill(dt, t.raw_data(), t.numel(), value);
  return t;
}

// The sink of a leaf: adds incoming gradients into leaf.grad.
class AccumulateGrad : public Node {
 public:
  explicit AccumulateGrad(std::shared_ptr<TensorImpl> leaf) : leaf_(std::move(leaf)) {}
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override {
    Tensor& g = grads[0];
    if (!g.defined()) return {};
    REMORA_CHECK(g.shape() == leaf_->shape,
                 "autograd: gradient of shape " << shape_str(g.shape())
                                                << " reached a leaf of shape "
                                                << shape_str(leaf_->shape)
                                                << "; an op's backward returned a wrong shape");
    Tensor& acc = leaf_->grad;
    if (!acc.defined()) {
      acc = sole_owner(g) ? std::move(g) : g.clone();  // a copy when g may alias a live buffer
    } else {  // acc += g in place (handles on .grad see the sum)
      detail::check_same("add_", acc, g);
      BinaryArgs ba;
      ba.op = BinaryOp::add;
      ba.dt = acc.dtype();
      ba.it = detail::make_iter(acc, {acc, g});
      ba.out = acc.raw_data();
      ba.a = acc.raw_data();
      ba.b = g.raw_data();
      backend(acc.device()).binary(ba);
    }
    run_grad_accumulated_hooks(leaf_);
    return {};
  }
  std::string name() const override { return "AccumulateGrad"; }

 private:
  std::shared_ptr<TensorImpl> leaf_;
};
}  // namespace

Node::~Node() {
  // Default destruction recurses once per node along a chain (each node owns
  // the next through its edges) and overflows the stack around 10^6 nodes.
  // Instead, take over the children this node holds the last reference to,
  // empty their edges before they die, and repeat with a heap stack.
  std::vector<std::shared_ptr<Node>> stack;
  auto take = [&](std::vector<Edge>& edges) {
    for (Edge& e : edges)
      if (e.fn && e.fn.use_count() == 1) stack.push_back(std::move(e.fn));
    edges.clear();
  };
  take(next);
  while (!stack.empty()) {
    std::shared_ptr<Node> n = std::move(stack.back());
    stack.pop_back();
    take(n->next);
  }  // n is destroyed here with no edges left
}

GradHookHandle on_grad_accumulated(const Tensor& leaf, GradAccumulatedHook fn) {
  REMORA_CHECK(leaf.defined(), "on_grad_accumulated: the tensor is undefined");
  REMORA_CHECK(leaf.is_leaf() && leaf.requires_grad(),
               "on_grad_accumulated: " << leaf.str()
                                       << " is not a leaf that requires grad (hooks run when "
                                          "a leaf's .grad is accumulated; call requires_grad_() "
                                          "on a tensor without history)");
  REMORA_CHECK(fn != nullptr, "on_grad_accumulated: the hook is empty");
  std::lock_guard<std::mutex> lock(g_hooks_mu);
  uint64_t id = g_next_hook_id++;
  g_hooks[leaf.impl()].push_back({id, leaf.impl_ptr(), std::move(fn)});
  g_hook_owner[id] = leaf.impl();
  g_num_hooks.fetch_add(1);
  return GradHookHandle(id);
}

void GradHookHandle::reset() {
  if (id_ == 0) return;
  std::lock_guard<std::mutex> lock(g_hooks_mu);
  auto own = g_hook_owner.find(id_);
  if (own != g_hook_owner.end()) {
    auto it = g_hooks.find(own->second);
    if (it != g_hooks.end()) {
      std::vector<GradHookEntry>& v = it->second;
      v.erase(std::remove_if(v.begin(), v.end(), [&](const GradHookEntry& e) { return e.id == id_; }),
              v.end());
      if (v.empty()) g_hooks.erase(it);
    }
    g_hook_owner.erase(own);
    g_num_hooks.fetch_sub(1);
  }
  id_ = 0;
}

int num_grad_accumulated_hooks(const Tensor& leaf) {
  if (!leaf.defined()) return 0;
  std::lock_guard<std::mutex> lock(g_hooks_mu);
  auto it = g_hooks.find(leaf.impl());
  if (it == g_hooks.end()) return 0;
  int n = 0;
  for (const GradHookEntry& e : it->second) n += e.leaf.lock().get() == leaf.impl();
  return n;
}

bool GradMode::is_enabled() { return g_grad_enabled; }
void GradMode::set_enabled(bool on) { g_grad_enabled = on; }

std::vector<Tensor> FunctionNode::apply(std::vector<Tensor>& grads) {
  REMORA_CHECK(fn_ != nullptr,
               name_ << ": trying to backward through the graph a second time, but its saved "
                        "tensors were freed after the first backward; pass retain_graph=true to "
                        "the first backward()");
  return fn_(grads);
}

Edge gradient_edge(const Tensor& t) {
  if (!t.defined()) return {};
  TensorImpl* impl = t.impl();
  if (impl->grad_fn) return {impl->grad_fn, impl->output_nr};
  if (!impl->requires_grad) return {};
  std::shared_ptr<Node> acc = impl->grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t.impl_ptr());
    acc->out_meta.push_back({impl->shape, impl->dtype, impl->storage->device});
    impl->grad_accumulator = acc;
  }
  return {acc, 0};
}

bool any_requires_grad(const std::vector<Tensor>& inputs) {
  if (!GradMode::is_enabled()) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}
bool any_requires_grad(std::initializer_list<Tensor> inputs) {
  return any_requires_grad(std::vector<Tensor>(inputs));
}

std::vector<Tensor> record(const char* name, const std::vector<Tensor>& inputs,
                           std::vector<Tensor> outputs, BackwardFn fn) {
  if (!any_requires_grad(inputs)) return outputs;
  auto node = std::make_shared<FunctionNode>(name, std::move(fn));
  for (const Tensor& t : inputs) node->next.push_back(gradient_edge(t));
  for (size_t k = 0; k < outputs.size(); ++k) {
    Tensor& o = outputs[k];
    node->out_meta.push_back({o.shape(), o.dtype(), o.device()});
    if (!is_floating(o.dtype())) continue;  // integer outputs (indices) carry no gradient
    o.impl()->grad_fn = node;
    o.impl()->output_nr = int(k);
  }
  return outputs;
}

std::vector<Tensor> record_optional_grads(const char* name, const std::vector<Tensor>& inputs,
                                          std::vector<Tensor> outputs, BackwardFn fn) {
  outputs = record(name, inputs, std::move(outputs), std::move(fn));
  for (const Tensor& o : outputs)
    if (o.impl()->grad_fn) o.impl()->grad_fn->undefined_grads_ok = true;
  return outputs;
}

Tensor record(const char* name, const std::vector<Tensor>& inputs, Tensor output,
              BackwardFn fn) {
  return record(name, inputs, std::vector<Tensor>{std::move(output)}, std::move(fn))[0];
}

void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads,
              bool retain_graph) {
  REMORA_CHECK(roots.size() == grads.size(),
               "backward: " << roots.size() << " roots but " << grads.size() << " gradients");
  NoGradGuard no_grad;  // gradients are computed without recording history

  // Gradient buffers: one slot per output of each pending node.
  std::unordered_map<Node*, std::vector<Tensor>> buffers;
  std::unordered_map<Node*, int> deps;
  std::vector<std::shared_ptr<Node>> ready;

  auto accumulate = [&](const Edge& e, const Tensor& g) {
    std::vector<Tensor>& buf = buffers[e.fn.get()];
    if (buf.empty()) buf.resize(e.fn->out_meta.size());
    Tensor& slot = buf[size_t(e.input_nr)];
    slot = slot.defined() ? detail::binary_raw(BinaryOp::add, slot, g) : g;
  };

  std::vector<Edge> root_edges;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& r = roots[i];
    REMORA_CHECK(r.defined(), "backward: root " << i << " is undefined");
    REMORA_CHECK(r.requires_grad(),
                 "backward: root " << i << " (" << r.str()
                                   << ") does not require grad and has no grad_fn; call "
                                      "requires_grad_() on the inputs before computing it");
    Tensor g = grads[i];
    if (!g.defined()) {
      REMORA_CHECK(r.numel() == 1, "backward: a gradient can be created implicitly only for a "
                                   "scalar output, but the output has shape "
                                       << shape_str(r.shape())
                                       << "; pass a gradient of that shape to backward()");
      g = filled(r.shape(), 1, r.dtype(), r.device());
    }
    REMORA_CHECK(g.shape() == r.shape() && g.dtype() == r.dtype(),
                 "backward: gradient " << g.str() << " does not match the output " << r.str());
    root_edges.push_back(gradient_edge(r));
    accumulate(root_edges.back(), g);
  }

  // Count, for every node reachable from the roots, how many edges point at it.
  {
    std::vector<Node*> stack;
    std::unordered_map<Node*, bool> seen;
    for (const Edge& e : root_edges)
      if (!seen[e.fn.get()]) {
        seen[e.fn.get()] = true;
        stack.push_back(e.fn.get());
      }
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      for (const Edge& e : n->next) {
        if (!e.fn) continue;
        ++deps[e.fn.get()];
        if (!seen[e.fn.get()]) {
          seen[e.fn.get()] = true;
          stack.push_back(e.fn.get());
        }
      }
    }
  }
  for (const Edge& e : root_edges)
    if (deps[e.fn.get()] == 0 &&
        std::find_if(ready.begin(), ready.end(), [&](const std::shared_ptr<Node>& p) {
          return p.get() == e.fn.get();
        }) == ready.end())
      ready.push_back(e.fn);

  while (!ready.empty()) {
    std::shared_ptr<Node> node = ready.back();
    ready.pop_back();
    std::vector<Tensor> in = std::move(buffers[node.get()]);
    buffers.erase(node.get());
    in.resize(node->out_meta.size());
    // A node whose outputs got no gradient at all is skipped; otherwise missing
    // output gradients are zeros, so backward functions never see undefined
    // ones (unless the node takes them as zero itself: undefined_grads_ok).
    bool any = false;
    for (const Tensor& g : in) any = any || g.defined();
    std::vector<Tensor> out;
    if (any) {
      for (size_t k = 0; k < in.size() && !node->undefined_grads_ok; ++k)
        if (!in[k].defined()) {
          const TensorMeta& m = node->out_meta[k];
          in[k] = filled(m.shape, 0, m.dtype, m.device);
        }
      out = node->apply(in);
      REMORA_CHECK(out.empty() || out.size() == node->next.size(),
                   node->name() << ": backward returned " << out.size() << " gradients for "
                                << node->next.size() << " inputs");
    }
    in.clear();
    if (!retain_graph) node->release();
    for (size_t k = 0; k < node->next.size(); ++k) {
      const Edge& e = node->next[k];
      if (!e.fn) continue;
      if (k < out.size() && out[k].defined()) {
        const TensorMeta& m = e.fn->out_meta[size_t(e.input_nr)];
        REMORA_CHECK(out[k].shape() == m.shape,
                     node->name() << ": backward produced a gradient of shape "
                                  << shape_str(out[k].shape()) << " for input " << k
                                  << " of shape " << shape_str(m.shape));
        accumulate(e, out[k]);
      }
      if (--deps[e.fn.get()] == 0) ready.push_back(e.fn);
    }
  }
}

}  // namespace remora
