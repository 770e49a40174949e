//===- PTXText.cpp - Module-level edits of PTX text -----------------------===//

#include "flexsn/Runtime/CUDA/PTXText.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

using llvm::ArrayRef;
using llvm::StringRef;

namespace {
/// A top-level statement, with the comment and blank lines before it.
struct Statement {
  /// With its comments; `code` without them.
  std::string text, code;
  enum Kind { Header, Entry, Other, Trivia } kind = Other;
  /// The entry's name, or the variable a declaration names (else empty).
  std::string name;
  /// The `.func` a statement declares or defines (else empty), and whether
  /// it defines it (a body).
  std::string func;
  bool defines = false;
};

bool isIdentifierChar(char c) {
  return llvm::isAlnum(c) || c == '_' || c == '$' || c == '%';
}

/// `text` with every whole identifier `from` written `to`.
std::string renameIdentifier(StringRef text, StringRef from, StringRef to) {
  std::string out;
  size_t pos = 0;
  while (true) {
    size_t at = text.find(from, pos);
    if (at == StringRef::npos)
      break;
    size_t end = at + from.size();
    bool whole = (at == 0 || !isIdentifierChar(text[at - 1])) &&
                 (end == text.size() || !isIdentifierChar(text[end]));
    out += text.slice(pos, at).str();
    out += whole ? to.str() : from.str();
    pos = end;
  }
  out += text.drop_front(pos).str();
  return out;
}

/// The identifier ending at `end` in `s` (skipping blanks before it).
StringRef identifierBefore(StringRef s, size_t end) {
  StringRef head = s.take_front(end).rtrim();
  size_t begin = head.size();
  while (begin > 0 && (llvm::isAlnum(head[begin - 1]) ||
                       head[begin - 1] == '_' || head[begin - 1] == '$' ||
                       head[begin - 1] == '%'))
    --begin;
  return head.drop_front(begin);
}

/// Splits `ptx` into its top-level statements, counting braces outside
/// comments. A statement ends at a `;` outside braces or where the braces
/// of its body close. None when braces do not balance.
std::optional<llvm::SmallVector<Statement>> split(StringRef ptx) {
  llvm::SmallVector<Statement> out;
  std::string pending; // comment and blank lines before the next statement
  std::string current;
  bool inComment = false, inStatement = false;
  int depth = 0;
  auto finish = [&](Statement::Kind kind) {
    Statement st;
    st.text = pending + current;
    st.code = StringRef(current).trim().str();
    st.kind = kind;
    StringRef words = StringRef(current).ltrim();
    if (kind == Statement::Other) {
      StringRef w = words;
      w.consume_front(".visible") || w.consume_front(".weak") ||
          w.consume_front(".extern");
      w = w.ltrim();
      if (w.starts_with(".func")) {
        // `.func (.param ...) name(` or `.func name(`: the identifier
        // before the parameter list that follows the return value's.
        StringRef rest = w.drop_front(5).ltrim();
        if (rest.starts_with("(")) {
          size_t close = rest.find(')');
          rest = close == StringRef::npos ? StringRef() : rest.drop_front(close + 1).ltrim();
        }
        st.func = rest.take_while(isIdentifierChar).str();
        st.defines = StringRef(st.code).contains('{');
      }
      if (w.consume_front(".entry")) {
        st.kind = Statement::Entry;
        st.name = w.ltrim()
                      .take_until([](char c) {
                        return c == '(' || c == ' ' || c == '\t' ||
                               c == '\n' || c == ';' || c == '{';
                      })
                      .str();
      } else if (w.starts_with(".global") || w.starts_with(".shared") ||
                 w.starts_with(".const")) {
        size_t end = w.find_first_of("[=;");
        if (end != StringRef::npos)
          st.name = identifierBefore(w, end).str();
      }
    }
    out.push_back(std::move(st));
    pending.clear();
    current.clear();
    inStatement = false;
  };
  while (!ptx.empty()) {
    auto [line, rest] = ptx.split('\n');
    ptx = rest;
    bool code = false, endsStatement = false;
    for (size_t i = 0; i < line.size(); ++i) {
      if (inComment) {
        if (line.substr(i).starts_with("*/")) {
          inComment = false;
          ++i;
        }
        continue;
      }
      if (line.substr(i).starts_with("//"))
        break;
      if (line.substr(i).starts_with("/*")) {
        inComment = true;
        ++i;
        continue;
      }
      char c = line[i];
      if (!llvm::isSpace(c))
        code = true;
      if (c == '{') {
        ++depth;
      } else if (c == '}') {
        if (--depth < 0)
          return std::nullopt;
        if (depth == 0)
          endsStatement = true;
      } else if (c == ';' && depth == 0) {
        endsStatement = true;
      }
    }
    // The module header's directives take one line and no `;`.
    StringRef words = line.ltrim();
    bool header = !inStatement && depth == 0 &&
                  (words.starts_with(".version") ||
                   words.starts_with(".target") ||
                   words.starts_with(".address_size"));
    std::string &into = inStatement || code ? current : pending;
    into.append(line.begin(), line.end());
    into.push_back('\n');
    if (code)
      inStatement = true;
    if (header)
      finish(Statement::Header);
    else if (inStatement && depth == 0 && endsStatement)
      finish(Statement::Other);
  }
  if (depth != 0 || inStatement || inComment)
    return std::nullopt;
  if (!pending.empty()) {
    current.clear();
    finish(Statement::Trivia);
  }
  return out;
}
} // namespace

std::optional<std::string>
mlir::flexsn::cuda::extractPTXEntry(StringRef ptx, StringRef entry) {
  auto statements = split(ptx);
  if (!statements)
    return std::nullopt;
  std::string out;
  bool found = false;
  for (const Statement &st : *statements) {
    if (st.kind == Statement::Entry && st.name != entry)
      continue;
    found |= st.kind == Statement::Entry;
    out += st.text;
  }
  if (!found)
    return std::nullopt;
  return out;
}

std::optional<std::string>
mlir::flexsn::cuda::mergePTXModules(ArrayRef<std::string> modules) {
  std::string header, out;
  llvm::StringSet<> seen, entries;
  llvm::StringMap<std::string> variables, functions;
  for (auto [i, module] : llvm::enumerate(modules)) {
    auto statements = split(module);
    if (!statements)
      return std::nullopt;
    // A module-local function (libdevice's, as LLVM optimized it for this
    // entry) defined by an earlier module with another body keeps its
    // definition under a new name, and so do this module's calls of it.
    std::string text = module;
    bool renamed = false;
    for (const Statement &st : *statements) {
      if (!st.defines || st.func.empty())
        continue;
      auto it = functions.find(st.func);
      if (it == functions.end() || it->second == st.code)
        continue;
      std::string fresh;
      for (unsigned n = 1; fresh.empty() || functions.count(fresh); ++n)
        fresh = st.func + "_m" + std::to_string(i) + "_" + std::to_string(n);
      text = renameIdentifier(text, st.func, fresh);
      functions.try_emplace(fresh, "");
      renamed = true;
    }
    if (renamed) {
      statements = split(text);
      if (!statements)
        return std::nullopt;
    }
    for (const Statement &st : *statements)
      if (st.defines && !st.func.empty())
        functions[st.func] = st.code;
    std::string moduleHeader;
    for (const Statement &st : *statements) {
      if (st.kind == Statement::Header) {
        moduleHeader += st.code + "\n";
        if (i == 0)
          out += st.text;
        continue;
      }
      if (st.kind == Statement::Trivia)
        continue;
      if (st.kind == Statement::Entry) {
        if (!entries.insert(st.name).second)
          return std::nullopt;
        out += st.text;
        continue;
      }
      StringRef body = st.code;
      if (!seen.insert(body).second)
        continue; // the same declaration, already there
      if (!st.name.empty()) {
        auto [it, inserted] = variables.try_emplace(st.name, body.str());
        if (!inserted)
          return std::nullopt; // one variable declared two ways
      }
      out += st.text;
    }
    if (i == 0)
      header = moduleHeader;
    else if (moduleHeader != header)
      return std::nullopt;
  }
  if (entries.empty())
    return std::nullopt;
  return out;
}
