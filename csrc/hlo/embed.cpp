#include "hlo/embed.h"

#include <c10/util/Exception.h>

#include <cctype>
#include <set>

namespace torch_tpu::hlo {
namespace {

// MLIR's bare identifier characters after the first: [a-zA-Z0-9_$.-].
bool id_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' || c == '.' || c == '-'; }

// Index past the string literal starting at `i` (which is '"').
size_t skip_string(const std::string& s, size_t i) {
  for (++i; i < s.size(); ++i) {
    if (s[i] == '\\') {
      ++i;
    } else if (s[i] == '"') {
      return i + 1;
    }
  }
  return s.size();
}

}  // namespace

EmbeddedModule embed_module(const std::string& text, const std::string& prefix) {
  // The module's body: from after the header's opening brace to its closing one.
  size_t m = text.find("module");
  size_t open = text.find("{\n", m == std::string::npos ? 0 : m);
  // The header's attribute dictionary has braces of its own: the body
  // opens at the first '{' that ends a line.
  size_t close = text.rfind('}');
  TORCH_CHECK(m != std::string::npos && open != std::string::npos && close != std::string::npos && close > open,
              "torch_tpu: the embedded program is not an MLIR module");
  std::string body = text.substr(open + 2, close - open - 2);

  // Symbols it defines: `func.func [public|private] @name(`.
  std::set<std::string> defined;
  for (size_t p = body.find("func.func"); p != std::string::npos; p = body.find("func.func", p + 1)) {
    size_t at = body.find('@', p);
    size_t paren = body.find('(', p);
    TORCH_CHECK(at != std::string::npos && paren != std::string::npos && at < paren,
                "torch_tpu: cannot read a function name in the embedded program");
    size_t e = at + 1;
    while (e < body.size() && id_char(body[e])) ++e;
    defined.insert(body.substr(at + 1, e - at - 1));
  }
  TORCH_CHECK(defined.count("main"), "torch_tpu: the embedded program has no @main");

  std::string out;
  out.reserve(body.size() + 64 * defined.size());
  for (size_t i = 0; i < body.size();) {
    char c = body[i];
    if (c == '"') {
      size_t e = skip_string(body, i);
      out.append(body, i, e - i);
      i = e;
    } else if (c == '@') {
      size_t e = i + 1;
      while (e < body.size() && id_char(body[e])) ++e;
      std::string name = body.substr(i + 1, e - i - 1);
      out += '@';
      if (defined.count(name)) out += prefix;
      out += name;
      i = e;
    } else {
      out += c;
      ++i;
    }
  }
  const std::string pub = "func.func public @" + prefix;
  for (size_t p = out.find(pub); p != std::string::npos; p = out.find(pub, p + 1))
    out.replace(p, 16, "func.func private");
  // Top-level lines other than functions (a global mesh, say) would need
  // their own handling: refuse them rather than embed them wrong.
  size_t line = 0;
  int depth = 0;
  while (line < out.size()) {
    size_t end = out.find('\n', line);
    if (end == std::string::npos) end = out.size();
    std::string l = out.substr(line, end - line);
    size_t first = l.find_first_not_of(' ');
    if (depth == 0 && first != std::string::npos)
      TORCH_CHECK(l.compare(first, 9, "func.func") == 0,
                  "torch_tpu: the embedded program has a top-level operation other than a function: ", l);
    for (size_t k = 0; k < l.size(); ++k) {
      if (l[k] == '"') {
        k = skip_string(l, k) - 1;
      } else if (l[k] == '{') {
        ++depth;
      } else if (l[k] == '}') {
        --depth;
      }
    }
    line = end + 1;
  }
  if (!out.empty() && out.back() != '\n') out += '\n';
  return EmbeddedModule{out, prefix + "main"};
}

std::vector<Value> call_embedded(Builder& b, EmbeddedModule m, const std::string& name,
                                 const std::vector<Value>& operands, const std::vector<TensorType>& results) {
  std::string callee = m.main;
  add_function_text(b, callee, std::move(m.functions));
  std::string attrs = "name = \"" + name + "\", decomposition = @" + callee;
  return b.emit_multi("composite", operands, results, attrs);
}

}  // namespace torch_tpu::hlo
