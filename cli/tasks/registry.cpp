// SPDX-License-Identifier: BSD-3-Clause
// The task registry (task.h): the tasks listed in tasks.def.
#include <algorithm>

#include "../task.h"

namespace remora {
namespace driver {

#define REMORA_TASK(entry) TaskEntry entry();
#include "tasks.def"
#undef REMORA_TASK

const std::vector<TaskEntry>& task_registry() {
  static const std::vector<TaskEntry> all = {
#define REMORA_TASK(entry) entry(),
#include "tasks.def"
#undef REMORA_TASK
  };
  return all;
}

std::vector<std::string> data_type_names() {
  std::vector<std::string> names;
  for (const TaskEntry& t : task_registry())
    for (const std::string& d : t.data_types)
      if (std::find(names.begin(), names.end(), d) == names.end()) names.push_back(d);
  return names;
}

const TaskEntry* task_for_data(const std::string& data_type) {
  for (const TaskEntry& t : task_registry())
    if (std::find(t.data_types.begin(), t.data_types.end(), data_type) != t.data_types.end()) return &t;
  return nullptr;
}

const TaskEntry* find_task(const std::string& data_type, bool encoder) {
  for (const TaskEntry& t : task_registry())
    if (t.encoder == encoder && std::find(t.data_types.begin(), t.data_types.end(), data_type) != t.data_types.end())
      return &t;
  return nullptr;
}

const TaskEntry& task_named(const std::string& name) {
  for (const TaskEntry& t : task_registry())
    if (t.name == name) return t;
  throw Error("no task named " + name + " is registered");
}

}  // namespace driver
}  // namespace remora
