// A whole file read into memory, with the errors every loader of outside
// files gives: kNotFound when it does not exist, kIo when it cannot be read
// (a directory included), each naming the file and what it was meant to be.
#pragma once

#include <string>
#include <string_view>

namespace dp {

// `what` starts the messages: "cannot open <what> file 'x': ...".
std::string ReadFileBytes(const std::string& path, std::string_view what);

}  // namespace dp
