#include "core/error.h"

namespace dp {

const char* CodeName(Code code) {
  switch (code) {
    case Code::kOk: return "OK";
    case Code::kInvalidArgument: return "INVALID_ARGUMENT";
    case Code::kNotFound: return "NOT_FOUND";
    case Code::kAlreadyExists: return "ALREADY_EXISTS";
    case Code::kOutOfRange: return "OUT_OF_RANGE";
    case Code::kUnimplemented: return "UNIMPLEMENTED";
    case Code::kInternal: return "INTERNAL";
    case Code::kUnavailable: return "UNAVAILABLE";
    case Code::kCancelled: return "CANCELLED";
    case Code::kTimeout: return "TIMEOUT";
    case Code::kDataLoss: return "DATA_LOSS";
    case Code::kOutOfMemory: return "OUT_OF_MEMORY";
    case Code::kFailedPrecondition: return "FAILED_PRECONDITION";
    case Code::kIo: return "IO";
    case Code::kParse: return "PARSE";
    case Code::kInvalidNet: return "INVALID_NET";
    case Code::kShape: return "SHAPE";
    case Code::kDType: return "DTYPE";
  }
  return "UNKNOWN";
}

}  // namespace dp
