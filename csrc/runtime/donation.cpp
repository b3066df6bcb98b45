#include "runtime/donation.h"

#include <c10/util/Exception.h>

namespace torch_tpu::runtime {

std::vector<std::string> split_types(const std::string& list) {
  std::vector<std::string> out;
  int depth = 0;
  std::string cur;
  for (char c : list) {
    if (c == '<' || c == '{') ++depth;
    if (c == '>' || c == '}') --depth;
    if (c == ',' && depth == 0) {
      out.push_back(cur);
      cur.clear();
      continue;
    }
    if (c == ' ' && cur.empty()) continue;
    cur += c;
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

Aliases pick_aliases(const std::vector<bool>& donatable, const std::vector<std::string>& param_types,
                     const std::vector<std::string>& result_types) {
  Aliases out;
  std::vector<bool> taken(result_types.size(), false);
  for (size_t p = 0; p < donatable.size() && p < param_types.size(); ++p) {
    if (!donatable[p]) continue;
    for (size_t r = 0; r < result_types.size(); ++r)
      if (!taken[r] && result_types[r] == param_types[p]) {
        taken[r] = true;
        out.emplace_back(static_cast<int>(p), static_cast<int>(r));
        break;
      }
  }
  return out;
}

std::string with_aliases(const std::string& module, const Aliases& aliases) {
  if (aliases.empty()) return module;
  const std::string head = "func.func public @main(";
  size_t h = module.find(head);
  TORCH_CHECK(h != std::string::npos, "torch_tpu: internal error: program has no @main");
  size_t start = h + head.size();
  size_t end = module.find(") -> (", start);
  TORCH_CHECK(end != std::string::npos, "torch_tpu: internal error: cannot read @main's signature");
  std::vector<std::string> params = split_types(module.substr(start, end - start));
  for (const auto& [p, r] : aliases) {
    TORCH_CHECK(p >= 0 && p < static_cast<int>(params.size()), "torch_tpu: internal error: alias of parameter ", p,
                " of ", params.size());
    params[p] += " {tf.aliasing_output = " + std::to_string(r) + " : i32}";
  }
  std::string sig;
  for (size_t i = 0; i < params.size(); ++i) sig += (i ? ", " : "") + params[i];
  return module.substr(0, start) + sig + module.substr(end);
}

void append_aliases(std::string& key, const Aliases& aliases) {
  if (aliases.empty()) return;
  key += "|donate:";
  for (const auto& [p, r] : aliases) key += std::to_string(p) + '>' + std::to_string(r) + ',';
}

}  // namespace torch_tpu::runtime
