#include "lowering/registry.h"

#include <c10/util/Exception.h>

#include <unordered_map>

namespace torch_tpu::lowering {
namespace {

std::unordered_map<std::string, Rule>& table() {
  static auto* t = new std::unordered_map<std::string, Rule>();
  return *t;
}

}  // namespace

void register_rule(const char* name, Rule rule) {
  bool inserted = table().emplace(name, rule).second;
  TORCH_CHECK(inserted, "torch_tpu: two lowering rules for ", name);
}

Rule find_rule(const std::string& name) {
  auto& t = table();
  auto it = t.find(name);
  if (it != t.end()) return it->second;
  // In-place ops share the functional rule: "add_" -> "add". Dunder names
  // ("__and__") end in an underscore too but are looked up whole above.
  if (name.size() > 1 && name.back() == '_' && name[name.size() - 2] != '_') {
    it = t.find(name.substr(0, name.size() - 1));
    if (it != t.end()) return it->second;
  }
  return nullptr;
}

std::vector<std::string> rule_names() {
  std::vector<std::string> names;
  for (auto& [k, v] : table()) names.push_back(k);
  return names;
}

}  // namespace torch_tpu::lowering
