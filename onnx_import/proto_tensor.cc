#include "onnx_import/proto_tensor.h"

#include <fcntl.h>
#include <google/protobuf/io/coded_stream.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>

#include "graph/error.h"
#include "graph/shape.h"

namespace ot::onnx_detail {

namespace {

std::string OnnxTypeName(int64_t e) {
  switch (e) {
    case 8:
      return "string";
    case 14:
      return "complex64";
    case 15:
      return "complex128";
    case 17:
      return "float8e4m3fn";
    case 18:
      return "float8e4m3fnuz";
    case 19:
      return "float8e5m2";
    case 20:
      return "float8e5m2fnuz";
    case 21:
      return "uint4";
    case 22:
      return "int4";
    case 23:
      return "float4e2m1";
    case 24:
      return "float8e8m0";
    case 25:
      return "uint2";
    case 26:
      return "int2";
    default:
      return "dtype(" + std::to_string(e) + ")";
  }
}

// Checked element count and byte size of `dims` for `dtype`. Throws on negative dims or overflow.
size_t CheckedBytes(const std::vector<int64_t>& dims, DataType dtype, const std::string& context) {
  uint64_t n = 1;
  bool zero = false;
  for (int64_t d : dims) {
    if (d < 0) throw Error(context + ": negative dimension in " + DimsToString(dims));
    if (d == 0) zero = true;
  }
  if (zero) return 0;
  const uint64_t limit = uint64_t(1) << 50;
  for (int64_t d : dims) {
    if (static_cast<uint64_t>(d) > limit / n) throw Error(context + ": shape " + DimsToString(dims) + " is too large");
    n *= static_cast<uint64_t>(d);
  }
  uint64_t bytes = n * SizeOf(dtype);
  if (bytes > limit) throw Error(context + ": shape " + DimsToString(dims) + " is too large");
  return static_cast<size_t>(bytes);
}

std::string Declared(const std::vector<int64_t>& dims, DataType dt, size_t bytes) {
  return "declared " + DimsToString(dims) + " " + DataTypeName(dt) + " = " + std::to_string(bytes) + " bytes";
}

bool ParseUint(const std::string& s, uint64_t* out) {
  if (s.empty() || s.size() > 19) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  *out = v;
  return true;
}

std::string RealPath(const std::string& p) {
  char* r = ::realpath(p.c_str(), nullptr);
  if (!r) return "";
  std::string s(r);
  std::free(r);
  return s;
}

// A bool byte other than 0/1 is not a valid C++ bool: store what a reader of the file would mean by it.
void NormalizeBool(Tensor* t) {
  if (t->dtype() != DataType::kBool) return;
  uint8_t* b = static_cast<uint8_t*>(t->raw());
  for (int64_t i = 0; i < t->numel(); ++i) b[i] = b[i] != 0;
}

// Reads external data for `tp` into `t` (already allocated with the declared shape).
Tensor ReadExternal(const onnx::TensorProto& tp, DataType dt, const std::vector<int64_t>& dims, size_t nbytes,
                    const std::string& base_dir, const std::string& context) {
  std::string location;
  uint64_t offset = 0, length = 0;
  bool has_location = false, has_length = false;
  for (const auto& kv : tp.external_data()) {
    if (kv.key() == "location") {
      location = kv.value();
      has_location = true;
    } else if (kv.key() == "offset") {
      if (!ParseUint(kv.value(), &offset))
        throw Error(context + ": external data offset '" + kv.value() + "' is not a valid number");
    } else if (kv.key() == "length") {
      if (!ParseUint(kv.value(), &length))
        throw Error(context + ": external data length '" + kv.value() + "' is not a valid number");
      has_length = true;
    }
  }
  if (!has_location || location.empty()) throw Error(context + ": external data without a location");
  const std::string loc_msg = context + ": external data location '" + location + "'";
  if (base_dir.empty()) throw Error(loc_msg + " refused: external data is not allowed here");
  if (location.find('\0') != std::string::npos) throw Error(loc_msg + " refused: contains a NUL byte");
  if (location[0] == '/' || location[0] == '\\') throw Error(loc_msg + " refused: absolute paths are not allowed");
  // Refuse any ".." path component (either separator).
  {
    size_t start = 0;
    for (size_t i = 0; i <= location.size(); ++i) {
      if (i == location.size() || location[i] == '/' || location[i] == '\\') {
        if (location.compare(start, i - start, "..") == 0 && i - start == 2)
          throw Error(loc_msg + " refused: '..' is not allowed");
        start = i + 1;
      }
    }
  }
  std::string base = RealPath(base_dir);
  if (base.empty()) throw Error(loc_msg + ": model folder '" + base_dir + "' cannot be resolved");
  std::string full = RealPath(base_dir + "/" + location);
  if (full.empty()) throw Error(loc_msg + ": cannot open (" + std::strerror(errno) + ")");
  std::string prefix = base == "/" ? base : base + "/";
  if (full.compare(0, prefix.size(), prefix) != 0)
    throw Error(loc_msg + " refused: resolves to '" + full + "' outside the model folder");

  int fd = ::open(full.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(loc_msg + ": cannot open (" + std::strerror(errno) + ")");
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(loc_msg + ": not a regular file");
  }
  uint64_t file_size = static_cast<uint64_t>(st.st_size);
  if (offset > file_size) {
    ::close(fd);
    throw Error(loc_msg + ": offset " + std::to_string(offset) + " is beyond the file size " +
                std::to_string(file_size));
  }
  if (!has_length) length = file_size - offset;
  if (length > file_size - offset) {
    ::close(fd);
    throw Error(loc_msg + ": offset " + std::to_string(offset) + " + length " + std::to_string(length) +
                " is beyond the file size " + std::to_string(file_size));
  }
  if (length != nbytes) {
    ::close(fd);
    throw Error(context + ": " + Declared(dims, dt, nbytes) + " but external data '" + location + "' has " +
                std::to_string(length));
  }
  Tensor t(dt, dims);
  uint8_t* dst = static_cast<uint8_t*>(t.raw());
  size_t got = 0;
  while (got < nbytes) {
    ssize_t r = ::pread(fd, dst + got, nbytes - got, static_cast<off_t>(offset + got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      ::close(fd);
      throw Error(loc_msg + ": read failed");
    }
    got += static_cast<size_t>(r);
  }
  ::close(fd);
  NormalizeBool(&t);
  return t;
}

template <typename Dst, typename Field>
void CopyField(const Field& f, Tensor* t) {
  Dst* d = t->data<Dst>();
  for (int i = 0; i < f.size(); ++i) {
    if constexpr (std::is_same_v<Dst, bool>)
      d[i] = f.Get(i) != 0;
    else
      d[i] = static_cast<Dst>(f.Get(i));
  }
}

// Stores the low 16 bits of int32_data as float16/bfloat16 bit patterns.
void CopyBits16(const google::protobuf::RepeatedField<int32_t>& f, Tensor* t) {
  uint16_t* d = static_cast<uint16_t*>(t->raw());
  for (int i = 0; i < f.size(); ++i) d[i] = static_cast<uint16_t>(static_cast<uint32_t>(f.Get(i)) & 0xffffu);
}

}  // namespace

DataType DataTypeFromOnnx(int64_t e, const std::string& context) {
  if (e >= 1 && e <= 16 && IsSupportedDataType(static_cast<int32_t>(e))) return static_cast<DataType>(e);
  if (e == 0) throw Error(context + ": data type is undefined");
  if (e == 8 || e == 14 || e == 15 || (e >= 17 && e <= 26))
    throw UnsupportedError(context + ": data type " + OnnxTypeName(e) + " is not supported");
  throw Error(context + ": invalid data type " + std::to_string(e));
}

Tensor TensorFromProto(const onnx::TensorProto& tp, const std::string& base_dir, const std::string& what,
                       const std::string& label) {
  const std::string context = what + ": " + label;
  DataType dt = DataTypeFromOnnx(tp.data_type(), context);
  std::vector<int64_t> dims(tp.dims().begin(), tp.dims().end());
  if (dims.size() > 64) throw Error(context + ": rank " + std::to_string(dims.size()) + " is too large");
  size_t nbytes = CheckedBytes(dims, dt, context);
  if (tp.has_segment()) throw UnsupportedError(context + ": segmented tensors are not supported");
  if (tp.data_location() == onnx::TensorProto::EXTERNAL) return ReadExternal(tp, dt, dims, nbytes, base_dir, context);
  if (tp.has_raw_data()) {
    if (tp.raw_data().size() != nbytes)
      throw Error(context + ": " + Declared(dims, dt, nbytes) + " but raw_data has " +
                  std::to_string(tp.raw_data().size()));
    Tensor t(dt, dims);
    if (nbytes) std::memcpy(t.raw(), tp.raw_data().data(), nbytes);
    NormalizeBool(&t);
    return t;
  }
  const size_t numel = SizeOf(dt) ? nbytes / SizeOf(dt) : 0;
  size_t count = 0;
  const char* field = "";
  switch (dt) {
    case DataType::kFloat32:
      count = tp.float_data_size();
      field = "float_data";
      break;
    case DataType::kFloat64:
      count = tp.double_data_size();
      field = "double_data";
      break;
    case DataType::kInt64:
      count = tp.int64_data_size();
      field = "int64_data";
      break;
    case DataType::kUint32:
    case DataType::kUint64:
      count = tp.uint64_data_size();
      field = "uint64_data";
      break;
    default:
      count = tp.int32_data_size();
      field = "int32_data";
      break;
  }
  // All-empty dims with zero elements and no data is fine; otherwise the counts must agree exactly.
  if (count != numel) {
    bool has_any = tp.float_data_size() || tp.double_data_size() || tp.int64_data_size() || tp.uint64_data_size() ||
                   tp.int32_data_size() || tp.string_data_size();
    if (!has_any && numel > 0) throw Error(context + ": " + Declared(dims, dt, nbytes) + " but the tensor has no data");
    throw Error(context + ": declared " + DimsToString(dims) + " " + DataTypeName(dt) + " = " + std::to_string(numel) +
                " elements but " + field + " has " + std::to_string(count));
  }
  Tensor t(dt, dims);
  if (numel == 0) return t;
  switch (dt) {
    case DataType::kFloat32:
      CopyField<float>(tp.float_data(), &t);
      break;
    case DataType::kFloat64:
      CopyField<double>(tp.double_data(), &t);
      break;
    case DataType::kInt64:
      CopyField<int64_t>(tp.int64_data(), &t);
      break;
    case DataType::kUint32:
      CopyField<uint32_t>(tp.uint64_data(), &t);
      break;
    case DataType::kUint64:
      CopyField<uint64_t>(tp.uint64_data(), &t);
      break;
    case DataType::kInt32:
      CopyField<int32_t>(tp.int32_data(), &t);
      break;
    case DataType::kInt16:
      CopyField<int16_t>(tp.int32_data(), &t);
      break;
    case DataType::kUint16:
      CopyField<uint16_t>(tp.int32_data(), &t);
      break;
    case DataType::kInt8:
      CopyField<int8_t>(tp.int32_data(), &t);
      break;
    case DataType::kUint8:
      CopyField<uint8_t>(tp.int32_data(), &t);
      break;
    case DataType::kBool:
      CopyField<bool>(tp.int32_data(), &t);
      break;
    case DataType::kFloat16:
    case DataType::kBFloat16:
      CopyBits16(tp.int32_data(), &t);
      break;
    default:
      throw UnsupportedError(context + ": data type " + DataTypeName(dt) + " is not supported");
  }
  return t;
}

void TensorToProto(const Tensor& t, const std::string& name, onnx::TensorProto* tp) {
  tp->Clear();
  if (!name.empty()) tp->set_name(name);
  for (int64_t d : t.dims()) tp->add_dims(d);
  tp->set_data_type(static_cast<int32_t>(t.dtype()));
  tp->set_raw_data(t.raw() ? static_cast<const char*>(t.raw()) : "", t.raw() ? t.nbytes() : 0);
}

bool ParseProto(const std::string& bytes, google::protobuf::MessageLite* m) {
  return ParseProto(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), m);
}

bool ParseProto(const uint8_t* data, size_t size, google::protobuf::MessageLite* m) {
  if (size > static_cast<size_t>(INT_MAX)) return false;
  google::protobuf::io::CodedInputStream in(data, static_cast<int>(size));
  in.SetTotalBytesLimit(INT_MAX);
  return m->ParseFromCodedStream(&in) && in.ConsumedEntireMessage();
}

}  // namespace ot::onnx_detail
