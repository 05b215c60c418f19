#include "comm/store_address.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"
#include "core/utf8.h"

namespace dp {
namespace {

// A printable form of untrusted text for messages: at most 200 bytes.
std::string Shown(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 200)) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      out += '?';
    } else {
      out += c;
    }
  }
  if (s.size() > 200) out += "...";
  return out;
}

[[noreturn]] void Bad(std::string_view url, const std::string& why) {
  DP_THROW(Code::kInvalidArgument, "store address '", Shown(url), "': ", why,
           " (expected file:///absolute/dir or redis://host:port[/prefix])");
}

bool HostChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '-' || c == '_';
}

// Keys and directories: printable, no backslash; '/' separates parts.
bool PathChar(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u >= 0x20 && u != 0x7f && c != '\\';
}

void ParseFile(std::string_view url, std::string_view rest, StoreAddress* a) {
  // file:///dir: an empty authority, then an absolute path.
  if (rest.empty() || rest[0] != '/') Bad(url, "a file store needs an absolute path after file:// (file:///dir)");
  for (char c : rest)
    if (!PathChar(c)) Bad(url, "the path has a control character or a backslash");
  // Parts: no "." or "..", so the directory is what it reads as.
  size_t pos = 1;
  while (pos <= rest.size()) {
    const size_t end = std::min(rest.find('/', pos), rest.size());
    const std::string_view part = rest.substr(pos, end - pos);
    if (part == "." || part == "..") Bad(url, "the path may not contain '.' or '..' parts");
    pos = end + 1;
  }
  std::string path(rest);
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  a->kind = StoreAddress::Kind::kFile;
  a->path = std::move(path);
}

void ParseRedis(std::string_view url, std::string_view rest, StoreAddress* a) {
  const size_t slash = rest.find('/');
  const std::string_view authority = rest.substr(0, slash);
  std::string_view prefix = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash + 1);
  if (authority.empty()) Bad(url, "no host after redis://");
  if (authority.find('@') != std::string_view::npos) Bad(url, "credentials in the URL are not supported");
  std::string_view host, port;
  if (authority[0] == '[') {  // [IPv6]:port
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) Bad(url, "an IPv6 host needs a closing ']'");
    host = authority.substr(1, close - 1);
    if (host.empty()) Bad(url, "empty IPv6 host");
    for (char c : host)
      if (std::isxdigit(static_cast<unsigned char>(c)) == 0 && c != ':' && c != '.')
        Bad(url, "an IPv6 host may hold only hex digits, ':' and '.'");
    const std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') Bad(url, "expected ':port' after the IPv6 host");
      port = after.substr(1);
      if (port.empty()) Bad(url, "empty port");
    }
  } else {
    const size_t colon = authority.find(':');
    host = authority.substr(0, colon);
    if (colon != std::string_view::npos) {
      port = authority.substr(colon + 1);
      if (port.empty()) Bad(url, "empty port");
    }
    if (host.empty()) Bad(url, "empty host");
    if (host.size() > 253) Bad(url, "the host name is longer than 253 bytes");
    for (char c : host)
      if (!HostChar(c)) Bad(url, "a host name may hold only letters, digits, '.', '-' and '_'");
  }
  int p = 6379;
  if (!port.empty()) {
    if (port.size() > 5) Bad(url, "the port must be in 1..65535");
    p = 0;
    for (char c : port) {
      if (c < '0' || c > '9') Bad(url, "the port must be a decimal number");
      p = p * 10 + (c - '0');
    }
    if (p < 1 || p > 65535) Bad(url, "the port must be in 1..65535");
  }
  while (!prefix.empty() && prefix.back() == '/') prefix.remove_suffix(1);
  for (char c : prefix)
    if (!PathChar(c) || c == ' ') Bad(url, "the key prefix has a space, a control character or a backslash");
  a->kind = StoreAddress::Kind::kRedis;
  a->host = std::string(host);
  a->port = p;
  a->prefix = std::string(prefix);
}

}  // namespace

std::string StoreAddress::ToString() const {
  if (kind == Kind::kFile) return "file://" + path;
  const bool v6 = host.find(':') != std::string::npos;
  std::string s = "redis://" + (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
  if (!prefix.empty()) s += "/" + prefix;
  return s;
}

StoreAddress ParseStoreAddress(std::string_view url) {
  if (url.empty()) Bad(url, "empty");
  if (url.size() > kMaxStoreUrlBytes) Bad(url, StrCat("longer than ", kMaxStoreUrlBytes, " bytes"));
  if (FindInvalidUtf8(url) != std::string_view::npos) Bad(url, "not valid UTF-8 or contains a NUL byte");
  StoreAddress a;
  constexpr std::string_view kFile = "file://", kRedis = "redis://";
  if (url.substr(0, kFile.size()) == kFile) {
    ParseFile(url, url.substr(kFile.size()), &a);
  } else if (url.substr(0, kRedis.size()) == kRedis) {
    ParseRedis(url, url.substr(kRedis.size()), &a);
  } else {
    Bad(url, "unknown scheme");
  }
  return a;
}

}  // namespace dp
