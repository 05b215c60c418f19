#include "graph/json_printer.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <string_view>

#include <flatbuffers/util.h>

#include "core/error.h"

namespace dp {
namespace {

using flatbuffers::BaseType;
using flatbuffers::FieldDef;
using flatbuffers::StructDef;
using flatbuffers::Type;

constexpr int kIndentStep = 2;

// A scalar at `p`, read bytewise: vectors of 8-byte scalars need not be
// 8-byte aligned in a valid buffer.
template <typename T>
T Load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return flatbuffers::EndianScalar(v);
}

template <typename T>
void AppendFloatImpl(std::string& out, T value) {
  if (std::isnan(value)) {
    out += "nan";
    return;
  }
  if (std::isinf(value)) {
    out += value < 0 ? "-inf" : "inf";
    return;
  }
  // The shortest digits that read back exactly (std::to_chars without a
  // precision), as plain decimals where a person would write them (as
  // JavaScript does: 1e-6 <= |value| < 1e21), else with an exponent.
  const T magnitude = std::fabs(value);
  const bool plain = magnitude == 0 || (magnitude >= T(1e-6) && magnitude < T(1e21));
  char buf[128];  // plain: at most 21 digits before the point and 6 + 17 after
  const auto r = std::to_chars(buf, buf + sizeof buf, value,
                               plain ? std::chars_format::fixed : std::chars_format::scientific);
  DP_ENFORCE_CODE(r.ec == std::errc(), Code::kInternal, "cannot print a floating-point value");
  const std::string_view text(buf, static_cast<size_t>(r.ptr - buf));
  out += text;
  if (text.find_first_of(".e") == std::string_view::npos) out += ".0";
}

class Printer {
 public:
  explicit Printer(std::string& out) : out_(out) {}

  void Table(const StructDef& def, const flatbuffers::Table* table, int indent) {
    if (def.fixed) Unsupported("struct", def.name);
    out_ += '{';
    int printed = 0;
    const int inner = indent + kIndentStep;
    for (const FieldDef* fd : def.fields.vec) {
      if (!table->CheckField(fd->value.offset)) continue;
      if (printed++) out_ += ',';
      NewLine(inner);
      out_ += '"';
      out_ += fd->name;
      out_ += "\": ";
      Field(*fd, table, inner);
    }
    NewLine(indent);
    out_ += '}';
  }

 private:
  [[noreturn]] static void Unsupported(const char* what, const std::string& name) {
    DP_THROW(Code::kInternal, "the JSON printer does not handle the ", what, " '", name, "' of this schema");
  }

  void NewLine(int indent) {
    out_ += '\n';
    out_.append(static_cast<size_t>(indent), ' ');
  }

  void Field(const FieldDef& fd, const flatbuffers::Table* table, int indent) {
    if (fd.flexbuffer || fd.nested_flatbuffer != nullptr) Unsupported("nested buffer field", fd.name);
    const Type& type = fd.value.type;
    const uint8_t* at = table->GetAddressOf(fd.value.offset);
    if (flatbuffers::IsScalar(type.base_type)) {
      Scalar(at, type);
      return;
    }
    const uint8_t* target = at + Load<flatbuffers::uoffset_t>(at);
    switch (type.base_type) {
      case flatbuffers::BASE_TYPE_STRING: String(target); return;
      case flatbuffers::BASE_TYPE_VECTOR: Vector(target, type.VectorType(), fd.name, indent); return;
      case flatbuffers::BASE_TYPE_STRUCT:
        Table(*type.struct_def, reinterpret_cast<const flatbuffers::Table*>(target), indent);
        return;
      default: Unsupported("field", fd.name);
    }
  }

  void String(const uint8_t* p) {
    const auto* s = reinterpret_cast<const flatbuffers::String*>(p);
    // As GenerateText calls it: strict UTF-8 (dp's readers check it), \u escapes.
    if (!flatbuffers::EscapeString(s->c_str(), s->size(), &out_, /*allow_non_utf8=*/false, /*natural_utf8=*/false))
      DP_THROW(Code::kInternal, "a string that is not UTF-8 cannot be printed as JSON");
  }

  void Vector(const uint8_t* p, const Type& element, const std::string& name, int indent) {
    const flatbuffers::uoffset_t n = Load<flatbuffers::uoffset_t>(p);
    const uint8_t* data = p + sizeof(flatbuffers::uoffset_t);
    const size_t size = element.base_type == flatbuffers::BASE_TYPE_STRUCT ||
                                element.base_type == flatbuffers::BASE_TYPE_STRING
                            ? sizeof(flatbuffers::uoffset_t)
                            : flatbuffers::SizeOf(element.base_type);
    if (element.base_type == flatbuffers::BASE_TYPE_STRUCT && element.struct_def->fixed)
      Unsupported("vector of structs", name);
    if (element.base_type == flatbuffers::BASE_TYPE_UNION) Unsupported("vector of unions", name);
    out_ += '[';
    const int inner = indent + kIndentStep;
    for (flatbuffers::uoffset_t i = 0; i < n; ++i) {
      if (i) out_ += ',';
      NewLine(inner);
      const uint8_t* e = data + static_cast<size_t>(i) * size;
      if (flatbuffers::IsScalar(element.base_type)) {
        Scalar(e, element);
      } else {
        const uint8_t* target = e + Load<flatbuffers::uoffset_t>(e);
        if (element.base_type == flatbuffers::BASE_TYPE_STRING)
          String(target);
        else
          Table(*element.struct_def, reinterpret_cast<const flatbuffers::Table*>(target), inner);
      }
    }
    // GenerateText's layout: an empty vector is "[", a blank line and "]".
    if (n == 0) out_ += '\n';
    NewLine(indent);
    out_ += ']';
  }

  template <typename T>
  void Integer(T v, const Type& type) {
    // Enum values by name, as GenerateText writes them (strings in quotes).
    if (type.enum_def != nullptr) {
      if (const flatbuffers::EnumVal* ev = type.enum_def->ReverseLookup(static_cast<int64_t>(v))) {
        out_ += '"';
        out_ += ev->name;
        out_ += '"';
        return;
      }
    }
    char buf[32];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    out_.append(buf, r.ptr);
  }

  void Scalar(const uint8_t* p, const Type& type) {
    switch (type.base_type) {
      case flatbuffers::BASE_TYPE_BOOL: out_ += Load<uint8_t>(p) != 0 ? "true" : "false"; return;
      case flatbuffers::BASE_TYPE_UTYPE:
      case flatbuffers::BASE_TYPE_UCHAR: Integer(Load<uint8_t>(p), type); return;
      case flatbuffers::BASE_TYPE_CHAR: Integer(Load<int8_t>(p), type); return;
      case flatbuffers::BASE_TYPE_SHORT: Integer(Load<int16_t>(p), type); return;
      case flatbuffers::BASE_TYPE_USHORT: Integer(Load<uint16_t>(p), type); return;
      case flatbuffers::BASE_TYPE_INT: Integer(Load<int32_t>(p), type); return;
      case flatbuffers::BASE_TYPE_UINT: Integer(Load<uint32_t>(p), type); return;
      case flatbuffers::BASE_TYPE_LONG: Integer(Load<int64_t>(p), type); return;
      case flatbuffers::BASE_TYPE_ULONG: Integer(Load<uint64_t>(p), type); return;
      case flatbuffers::BASE_TYPE_FLOAT: AppendFloatImpl(out_, Load<float>(p)); return;
      case flatbuffers::BASE_TYPE_DOUBLE: AppendFloatImpl(out_, Load<double>(p)); return;
      default: DP_THROW(Code::kInternal, "the JSON printer met scalar type ", static_cast<int>(type.base_type));
    }
  }

  std::string& out_;
};

}  // namespace

void AppendExactFloat(std::string& out, double value) { AppendFloatImpl(out, value); }
void AppendExactFloat(std::string& out, float value) { AppendFloatImpl(out, value); }

std::string FlatBufferRootToJson(const flatbuffers::Parser& parser, const void* buffer) {
  DP_ENFORCE_CODE(parser.root_struct_def_ != nullptr, Code::kInternal, "the JSON printer's schema has no root type");
  std::string out;
  out.reserve(1024);
  Printer(out).Table(*parser.root_struct_def_, flatbuffers::GetRoot<flatbuffers::Table>(buffer), 0);
  out += '\n';
  return out;
}

}  // namespace dp
