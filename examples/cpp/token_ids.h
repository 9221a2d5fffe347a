// Token ids from the command line, comma-separated ("101,7592,102": what a tokenizer gives).
#pragma once
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

inline std::vector<int64_t> parse_token_ids(const std::string& text) {
  std::vector<int64_t> ids;
  size_t at = 0;
  while (at <= text.size()) {
    size_t comma = text.find(',', at);
    if (comma == std::string::npos) comma = text.size();
    const std::string one = text.substr(at, comma - at);
    char* end = nullptr;
    const long long v = std::strtoll(one.c_str(), &end, 10);
    if (one.empty() || *end) throw std::runtime_error("token ids are whole numbers separated by commas, got " + text);
    ids.push_back(v);
    at = comma + 1;
  }
  return ids;
}
