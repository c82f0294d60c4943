// TensorProto .pb files and NumPy .npy (the .npz container is in npz.cc).
#include "onnx_import/tensor_io.h"

#include <onnx/onnx_pb.h>

#include <cstring>

#include "graph/error.h"
#include "graph/shape.h"
#include "onnx_import/file_util.h"
#include "onnx_import/npy_detail.h"
#include "onnx_import/proto_tensor.h"

namespace ot {

// --- TensorProto ---------------------------------------------------------------------------------------------

NamedTensor ReadTensorPb(const std::string& path) { return ParseTensorProto(io::ReadFile(path), path); }

NamedTensor ParseTensorProto(const std::string& bytes, const std::string& what) {
  onnx::TensorProto tp;
  if (!onnx_detail::ParseProto(bytes, &tp))
    throw Error(io::OneLine(what + ": not a valid TensorProto (protobuf parse failed)"));
  NamedTensor nt;
  nt.name = tp.name();
  try {
    nt.tensor = onnx_detail::TensorFromProto(tp, "", what, "tensor '" + tp.name() + "'");
  } catch (const UnsupportedError& e) {
    throw UnsupportedError(io::OneLine(e.what()));
  } catch (const Error& e) {
    throw Error(io::OneLine(e.what()));
  }
  return nt;
}

void WriteTensorPb(const std::string& path, const Tensor& t, const std::string& name) {
  if (t.empty_tensor()) throw Error(path + ": cannot write an empty (undefined) tensor");
  onnx::TensorProto tp;
  onnx_detail::TensorToProto(t, name, &tp);
  std::string out;
  if (tp.ByteSizeLong() > static_cast<size_t>(INT32_MAX) || !tp.SerializeToString(&out))
    throw Error(path + ": tensor '" + name + "' is too large for a TensorProto file");
  io::WriteFile(path, out);
}

// --- .npy ----------------------------------------------------------------------------------------------------

namespace {

struct NpyType {
  DataType dtype;
  char kind;  // f, i, u, b
  int size;
};

const NpyType kNpyTypes[] = {
    {DataType::kFloat32, 'f', 4}, {DataType::kFloat64, 'f', 8}, {DataType::kFloat16, 'f', 2},
    {DataType::kInt8, 'i', 1},    {DataType::kInt16, 'i', 2},   {DataType::kInt32, 'i', 4},
    {DataType::kInt64, 'i', 8},   {DataType::kUint8, 'u', 1},   {DataType::kUint16, 'u', 2},
    {DataType::kUint32, 'u', 4},  {DataType::kUint64, 'u', 8},  {DataType::kBool, 'b', 1},
};

// The header is a Python dict literal: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
class HeaderParser {
 public:
  HeaderParser(const std::string& s, const std::string& what) : s_(s), what_(what) {}

  void Parse(std::string* descr, bool* fortran, std::vector<int64_t>* shape) {
    bool has_descr = false, has_fortran = false, has_shape = false;
    Ws();
    Expect('{');
    for (;;) {
      Ws();
      if (Peek() == '}') {
        ++i_;
        break;
      }
      std::string key = String();
      Ws();
      Expect(':');
      Ws();
      if (key == "descr") {
        if (Peek() != '\'' && Peek() != '"')
          throw UnsupportedError(what_ + ": .npy structured dtypes are not supported");
        *descr = String();
        has_descr = true;
      } else if (key == "fortran_order") {
        *fortran = Bool();
        has_fortran = true;
      } else if (key == "shape") {
        *shape = Tuple();
        has_shape = true;
      } else {
        Fail("unknown header key '" + key + "'");
      }
      Ws();
      if (Peek() == ',') ++i_;
    }
    Ws();
    if (i_ != s_.size()) Fail("trailing characters after the header dict");
    if (!has_descr || !has_fortran || !has_shape) Fail("header lacks descr, fortran_order or shape");
  }

 private:
  [[noreturn]] void Fail(const std::string& m) { throw Error(what_ + ": not a valid .npy file (" + m + ")"); }
  char Peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void Ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r')) ++i_;
  }
  void Expect(char c) {
    if (Peek() != c) Fail(std::string("expected '") + c + "' in the header");
    ++i_;
  }
  std::string String() {
    char q = Peek();
    if (q != '\'' && q != '"') Fail("expected a string in the header");
    ++i_;
    size_t start = i_;
    while (i_ < s_.size() && s_[i_] != q) ++i_;
    if (i_ >= s_.size()) Fail("unterminated string in the header");
    std::string r = s_.substr(start, i_ - start);
    ++i_;
    return r;
  }
  bool Bool() {
    if (s_.compare(i_, 4, "True") == 0) {
      i_ += 4;
      return true;
    }
    if (s_.compare(i_, 5, "False") == 0) {
      i_ += 5;
      return false;
    }
    Fail("expected True or False");
  }
  std::vector<int64_t> Tuple() {
    std::vector<int64_t> r;
    Expect('(');
    for (;;) {
      Ws();
      if (Peek() == ')') {
        ++i_;
        return r;
      }
      if (Peek() < '0' || Peek() > '9') Fail("expected a non-negative integer in the shape");
      int64_t v = 0;
      while (Peek() >= '0' && Peek() <= '9') {
        if (v > (INT64_MAX - 9) / 10) Fail("dimension too large");
        v = v * 10 + (s_[i_++] - '0');
      }
      if (Peek() == 'L') ++i_;  // Python 2 long literal
      r.push_back(v);
      if (r.size() > 64) Fail("rank too large");
      Ws();
      if (Peek() == ',')
        ++i_;
      else if (Peek() != ')')
        Fail("expected ',' or ')' in the shape");
    }
  }

  const std::string& s_;
  const std::string& what_;
  size_t i_ = 0;
};

std::string Descr(DataType dt) {
  for (const auto& t : kNpyTypes)
    if (t.dtype == dt) return std::string(t.size == 1 ? "|" : "<") + t.kind + std::to_string(t.size);
  throw UnsupportedError("data type " + DataTypeName(dt) + " cannot be stored in a .npy file");
}

}  // namespace

namespace npy_detail {

Tensor ParseNpyBytes(const uint8_t* p, size_t n, const std::string& what) {
  static const char kMagic[] = "\x93NUMPY";
  if (n < 10 || std::memcmp(p, kMagic, 6) != 0) throw Error(what + ": not a .npy file (bad magic)");
  int major = p[6];
  size_t header_len, start;
  if (major == 1) {
    header_len = p[8] | (size_t(p[9]) << 8);
    start = 10;
  } else if (major == 2 || major == 3) {
    if (n < 12) throw Error(what + ": truncated .npy header");
    header_len = p[8] | (size_t(p[9]) << 8) | (size_t(p[10]) << 16) | (size_t(p[11]) << 24);
    start = 12;
  } else {
    throw Error(what + ": unsupported .npy version " + std::to_string(major) + "." + std::to_string(p[7]));
  }
  if (header_len > n - start) throw Error(what + ": truncated .npy header");
  std::string header(reinterpret_cast<const char*>(p + start), header_len);
  std::string descr;
  bool fortran = false;
  std::vector<int64_t> shape;
  HeaderParser(header, what).Parse(&descr, &fortran, &shape);
  if (descr == "|?" || descr == "?" || descr == "<?" || descr == "=?") descr = "|b1";
  const NpyType* type = nullptr;
  const char order = descr.size() == 3 ? descr[0] : '\0';
  if (descr.size() == 3 && (order == '<' || order == '|' || order == '=' || order == '>'))
    for (const auto& t : kNpyTypes)
      if (t.kind == descr[1] && descr[2] == static_cast<char>('0' + t.size)) type = &t;
  if (!type) throw UnsupportedError(what + ": .npy dtype '" + descr + "' is not supported");
  if (fortran)
    throw Error(what + ": .npy arrays in Fortran order (fortran_order True) are not supported; save with C order");
  // Checked size before allocating: the data must be present in the file.
  uint64_t numel = 1;
  bool zero = false;
  for (int64_t d : shape) zero |= d == 0;
  if (!zero)
    for (int64_t d : shape) {
      if (static_cast<uint64_t>(d) > (uint64_t(1) << 50) / numel) throw Error(what + ": .npy shape is too large");
      numel *= static_cast<uint64_t>(d);
    }
  else
    numel = 0;
  uint64_t nbytes = numel * type->size;
  uint64_t avail = n - start - header_len;
  if (nbytes != avail)
    throw Error(what + ": .npy declares " + DimsToString(shape) + " " + descr + " = " + std::to_string(nbytes) +
                " bytes but holds " + std::to_string(avail));
  Tensor t(type->dtype, shape);
  if (nbytes) std::memcpy(t.raw(), p + start + header_len, nbytes);
  if (order == '>' && type->size > 1) {  // big-endian file: swap to host (little-endian) order
    uint8_t* b = static_cast<uint8_t*>(t.raw());
    for (uint64_t i = 0; i < numel; ++i)
      for (int k = 0; k < type->size / 2; ++k) std::swap(b[i * type->size + k], b[i * type->size + type->size - 1 - k]);
  }
  if (type->dtype == DataType::kBool) {  // normalise to 0/1
    uint8_t* b = static_cast<uint8_t*>(t.raw());
    for (uint64_t i = 0; i < numel; ++i) b[i] = b[i] != 0;
  }
  return t;
}

}  // namespace npy_detail

Tensor ParseNpy(const std::string& bytes, const std::string& what) {
  return npy_detail::ParseNpyBytes(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), what);
}

Tensor ReadNpy(const std::string& path) {
  io::MappedFile f(path);
  return npy_detail::ParseNpyBytes(f.data(), f.size(), path);
}

std::string SerializeNpy(const Tensor& t) {
  if (t.empty_tensor()) throw Error("cannot write an empty (undefined) tensor as .npy");
  std::string shape = "(";
  for (size_t i = 0; i < t.dims().size(); ++i) {
    if (i) shape += ", ";
    shape += std::to_string(t.dims()[i]);
  }
  if (t.dims().size() == 1) shape += ",";
  shape += ")";
  std::string dict = "{'descr': '" + Descr(t.dtype()) + "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Pad with spaces and end with '\n' so the data starts on a 64-byte boundary (as numpy does).
  size_t prefix = 10;
  size_t total = prefix + dict.size() + 1;
  bool v2 = false;
  if ((total + 63) / 64 * 64 - prefix > 65535) {
    v2 = true;
    prefix = 12;
    total = prefix + dict.size() + 1;
  }
  size_t padded = (total + 63) / 64 * 64;
  dict.append(padded - total, ' ');
  dict += '\n';
  size_t hlen = dict.size();
  std::string out("\x93NUMPY", 6);
  out += static_cast<char>(v2 ? 2 : 1);
  out += '\0';
  out += static_cast<char>(hlen & 0xff);
  out += static_cast<char>((hlen >> 8) & 0xff);
  if (v2) {
    out += static_cast<char>((hlen >> 16) & 0xff);
    out += static_cast<char>((hlen >> 24) & 0xff);
  }
  out += dict;
  out.append(static_cast<const char*>(t.raw()), t.nbytes());
  return out;
}

void WriteNpy(const std::string& path, const Tensor& t) { io::WriteFile(path, SerializeNpy(t)); }

}  // namespace ot
