// Tensor files: TensorProto .pb (backend test data), .npy and .npz (stored, deflated, data descriptors, ZIP64),
// round trips for every dtype and malformed input.
#include "onnx_import/tensor_io.h"

#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "tests/onnx_import/import_test_util.h"

namespace ot {
namespace {

using test::SameTensor;
using test::TempDir;

const DataType kAllTypes[] = {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kBFloat16,
                              DataType::kInt8,    DataType::kInt16,   DataType::kInt32,   DataType::kInt64,
                              DataType::kUint8,   DataType::kUint16,  DataType::kUint32,  DataType::kUint64,
                              DataType::kBool};

// Random bytes that are valid values of the dtype (bool as 0/1).
Tensor RandomBytes(DataType dt, std::vector<int64_t> dims, uint32_t seed) {
  Tensor t(dt, std::move(dims));
  std::mt19937 rng(seed);
  auto* b = static_cast<uint8_t*>(t.raw());
  for (size_t i = 0; i < t.nbytes(); ++i) b[i] = dt == DataType::kBool ? rng() % 2 : static_cast<uint8_t>(rng());
  return t;
}

std::string ReadBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}
void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), bytes.size());
}

template <typename F>
std::string ErrorOf(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

#define EXPECT_ERROR_HAS(stmt, piece)                                                   \
  do {                                                                                  \
    std::string _m = ErrorOf([&] { stmt; });                                            \
    EXPECT_NE(_m.find(piece), std::string::npos) << _m << "  [lacks: " << piece << "]"; \
  } while (0)

// --- TensorProto ---------------------------------------------------------------------------------------------

TEST(TensorPb, BackendTestDataMatchesItsModel) {
  const std::string dir = "/usr/share/libonnx-testdata/data/node/test_abs/test_data_set_0";
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << "libonnx-testdata not installed";
  NamedTensor in = ReadTensorPb(dir + "/input_0.pb");
  NamedTensor out = ReadTensorPb(dir + "/output_0.pb");
  EXPECT_EQ(in.name, "x");
  EXPECT_EQ(out.name, "y");
  EXPECT_EQ(in.tensor.dtype(), DataType::kFloat32);
  EXPECT_EQ(in.tensor.dims(), (std::vector<int64_t>{3, 4, 5}));
  ASSERT_EQ(out.tensor.dims(), in.tensor.dims());
  bool any_negative = false;
  for (int64_t i = 0; i < in.tensor.numel(); ++i) {
    float x = in.tensor.data<float>()[i];
    any_negative |= x < 0;
    EXPECT_EQ(out.tensor.data<float>()[i], std::fabs(x));
  }
  EXPECT_TRUE(any_negative);
  // A float16 and a bool input from other tests.
  const std::string root = "/usr/share/libonnx-testdata/data/node/";
  NamedTensor h = ReadTensorPb(root + "test_cast_FLOAT_to_FLOAT16/test_data_set_0/output_0.pb");
  EXPECT_EQ(h.tensor.dtype(), DataType::kFloat16);
  EXPECT_EQ(h.tensor.dims(), (std::vector<int64_t>{3, 4}));
  NamedTensor b = ReadTensorPb(root + "test_and2d/test_data_set_0/input_0.pb");
  EXPECT_EQ(b.tensor.dtype(), DataType::kBool);
}

TEST(TensorPb, WriteReadEveryDtype) {
  TempDir dir;
  uint32_t seed = 1;
  for (DataType dt : kAllTypes)
    for (auto dims : std::vector<std::vector<int64_t>>{{}, {5}, {2, 3, 4}, {0, 7}}) {
      Tensor t = RandomBytes(dt, dims, seed++);
      std::string path = dir / ("t_" + DataTypeName(dt) + ".pb");
      WriteTensorPb(path, t, "name_" + DataTypeName(dt));
      NamedTensor r = ReadTensorPb(path);
      EXPECT_EQ(r.name, "name_" + DataTypeName(dt));
      EXPECT_TRUE(SameTensor(t, r.tensor)) << DataTypeName(dt) << DimsToString(dims);
    }
}

TEST(TensorPb, BoolBytesAreNormalised) {
  onnx::TensorProto tp;
  tp.set_data_type(9);
  tp.add_dims(3);
  tp.set_raw_data(std::string("\x00\x02\xff", 3));
  Tensor t = ParseTensorProto(tp.SerializeAsString(), "b.pb").tensor;
  const uint8_t* b = static_cast<const uint8_t*>(t.raw());
  EXPECT_EQ(b[0], 0);
  EXPECT_EQ(b[1], 1);
  EXPECT_EQ(b[2], 1);
}

TEST(TensorPb, Malformed) {
  EXPECT_ERROR_HAS(ParseTensorProto("\xff\xff\xff", "t.pb"), "t.pb: not a valid TensorProto");
  onnx::TensorProto tp;
  tp.set_name("W");
  tp.set_data_type(1);
  tp.add_dims(3);
  tp.add_dims(4);
  tp.set_raw_data(std::string(40, '\0'));
  EXPECT_ERROR_HAS(ParseTensorProto(tp.SerializeAsString(), "t.pb"),
                   "t.pb: tensor 'W': declared [3,4] float32 = 48 bytes but raw_data has 40");
  tp.set_raw_data(std::string(48, '\0'));
  tp.set_data_location(onnx::TensorProto::EXTERNAL);
  auto* kv = tp.add_external_data();
  kv->set_key("location");
  kv->set_value("w.bin");
  EXPECT_ERROR_HAS(ParseTensorProto(tp.SerializeAsString(), "t.pb"), "location 'w.bin'");
  EXPECT_ERROR_HAS(ReadTensorPb("/nonexistent/t.pb"), "/nonexistent/t.pb: cannot open");
}

// --- .npy ----------------------------------------------------------------------------------------------------

TEST(Npy, WriteReadEveryDtypeAndShape) {
  TempDir dir;
  uint32_t seed = 100;
  for (DataType dt : kAllTypes) {
    if (dt == DataType::kBFloat16) continue;  // numpy has no bfloat16
    for (auto dims : std::vector<std::vector<int64_t>>{{}, {1}, {7}, {2, 3}, {2, 0, 4}, {3, 1, 2, 5}}) {
      Tensor t = RandomBytes(dt, dims, seed++);
      std::string bytes = SerializeNpy(t);
      EXPECT_EQ((bytes.size() - t.nbytes()) % 64, 0u) << "data must start 64-byte aligned";
      Tensor r = ParseNpy(bytes, "mem.npy");
      EXPECT_TRUE(SameTensor(t, r)) << DataTypeName(dt) << DimsToString(dims);
      WriteNpy(dir / "a.npy", t);
      EXPECT_TRUE(SameTensor(t, ReadNpy(dir / "a.npy")));
    }
  }
  EXPECT_ERROR_HAS(SerializeNpy(Tensor(DataType::kBFloat16, {2})), "bfloat16");
}

TEST(Npy, HeaderText) {
  Tensor t = Tensor::FromFloat({1, 2, 3, 4, 5, 6}, {2, 3});
  std::string b = SerializeNpy(t);
  EXPECT_EQ(b.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  EXPECT_NE(b.find("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"), std::string::npos);
  std::string b1 = SerializeNpy(Tensor::FromInt64({1}, {1}));
  EXPECT_NE(b1.find("'shape': (1,)"), std::string::npos);
  std::string b0 = SerializeNpy(Tensor(DataType::kUint8, {}));
  EXPECT_NE(b0.find("'descr': '|u1'"), std::string::npos);
  EXPECT_NE(b0.find("'shape': ()"), std::string::npos);
}

std::string NpyWithHeader(int major, const std::string& dict, const std::string& data) {
  std::string h = dict + "\n";
  std::string out("\x93NUMPY", 6);
  out += static_cast<char>(major);
  out += '\0';
  out += static_cast<char>(h.size() & 0xff);
  out += static_cast<char>(h.size() >> 8);
  if (major >= 2) out += std::string(2, '\0');
  return out + h + data;
}

TEST(Npy, VersionsOrdersAndErrors) {
  std::string data(8, '\0');
  float v[2] = {1.5f, -2.0f};
  std::memcpy(data.data(), v, 8);
  for (int major : {1, 2, 3}) {
    Tensor t =
        ParseNpy(NpyWithHeader(major, "{\"descr\":\"<f4\",\"fortran_order\":False,\"shape\":(2L,)}", data), "v.npy");
    EXPECT_EQ(t.dims(), (std::vector<int64_t>{2}));
    EXPECT_EQ(t.data<float>()[1], -2.0f);
  }
  // Big-endian data is swapped to host order.
  std::string be = data;
  for (int i = 0; i < 2; ++i) std::reverse(be.begin() + 4 * i, be.begin() + 4 * i + 4);
  Tensor t = ParseNpy(NpyWithHeader(1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", be), "be.npy");
  EXPECT_EQ(t.data<float>()[0], 1.5f);
  EXPECT_ERROR_HAS(
      ParseNpy(NpyWithHeader(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", data), "f.npy"),
      "f.npy: .npy arrays in Fortran order");
  EXPECT_ERROR_HAS(
      ParseNpy(NpyWithHeader(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", data), "s.npy"),
      "s.npy: .npy declares [3] <f4 = 12 bytes but holds 8");
  EXPECT_ERROR_HAS(
      ParseNpy(NpyWithHeader(1, "{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", data), "c.npy"),
      "dtype '<c8' is not supported");
  EXPECT_ERROR_HAS(
      ParseNpy(NpyWithHeader(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", data), "n.npy"),
      "n.npy: not a valid .npy file");
  EXPECT_ERROR_HAS(
      ParseNpy(
          NpyWithHeader(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296), }",
                        data),
          "big.npy"),
      "big.npy");
  EXPECT_ERROR_HAS(ParseNpy(NpyWithHeader(4, "{}", ""), "v4.npy"), "unsupported .npy version 4");
  EXPECT_ERROR_HAS(ParseNpy(std::string("\x93NUMPY\x01\x00\xff\xff{", 11), "short.npy"),
                   "short.npy: truncated .npy header");
  EXPECT_ERROR_HAS(ParseNpy("hello world", "x.npy"), "x.npy: not a .npy file");
  EXPECT_ERROR_HAS(ReadNpy("/nonexistent.npy"), "/nonexistent.npy: cannot open");
}

TEST(Npy, RandomCorruptionNeverCrashes) {
  std::string good = SerializeNpy(Tensor::FromFloat({1, 2, 3, 4, 5, 6}, {2, 3}));
  std::mt19937 rng(7);
  int parsed = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    std::string b = good;
    int edits = 1 + rng() % 4;
    for (int k = 0; k < edits; ++k) b[rng() % std::min<size_t>(b.size(), 80)] = static_cast<char>(rng());
    if (rng() % 4 == 0) b.resize(rng() % b.size());
    try {
      ParseNpy(b, "m.npy");
      ++parsed;
    } catch (const Error&) {
    }
  }
  EXPECT_GT(parsed, 0);  // edits in the padding keep the file valid
}

// --- .npz ----------------------------------------------------------------------------------------------------

std::vector<NamedTensor> AllDtypeArrays() {
  std::vector<NamedTensor> v;
  uint32_t seed = 500;
  for (DataType dt : kAllTypes) {
    if (dt == DataType::kBFloat16) continue;
    v.push_back({"arr_" + DataTypeName(dt), RandomBytes(dt, {3, 5}, seed++)});
  }
  v.push_back({"scalar", Tensor::Scalar(4.0f)});
  v.push_back({"empty", Tensor(DataType::kInt64, {0, 2})});
  v.push_back({"zeros", Tensor(DataType::kFloat32, {64, 64})});  // compresses well -> deflated
  v.push_back({"dir/name with space", Tensor::FromInt64({1, 2, 3}, {3})});
  return v;
}

void ExpectSameArrays(const std::vector<NamedTensor>& a, const std::vector<NamedTensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].name, b[i].name);
    EXPECT_TRUE(SameTensor(a[i].tensor, b[i].tensor)) << a[i].name;
  }
}

TEST(Npz, WriteReadStoredAndDeflated) {
  TempDir dir;
  auto arrays = AllDtypeArrays();
  for (bool compress : {false, true}) {
    std::string path = dir / (compress ? "d.npz" : "s.npz");
    WriteNpz(path, arrays, compress);
    ExpectSameArrays(arrays, ReadNpz(path));
    ExpectSameArrays(arrays, ParseNpz(ReadBytes(path), path));
  }
  EXPECT_LT(std::filesystem::file_size(dir / "d.npz"), std::filesystem::file_size(dir / "s.npz"));
  EXPECT_ERROR_HAS(WriteNpz(dir / "e.npz", {{"a", Tensor::Scalar(1)}, {"a", Tensor::Scalar(2)}}), "'a' is given twice");
}

// More than 65535 members needs the ZIP64 end records; both our reader and Python's zipfile must accept them.
TEST(Npz, Zip64EndRecordsForManyMembers) {
  TempDir dir;
  std::vector<NamedTensor> arrays;
  for (int i = 0; i < 70000; ++i) {
    std::string name = "a";
    name += std::to_string(i);
    arrays.push_back({name, Tensor::FromInt64({i}, {1})});
  }
  WriteNpz(dir / "many.npz", arrays, /*compress=*/false);
  std::string bytes = ReadBytes(dir / "many.npz");
  EXPECT_NE(bytes.find(std::string("PK\x06\x06", 4)), std::string::npos) << "no ZIP64 end record";
  auto r = ReadNpz(dir / "many.npz");
  ASSERT_EQ(r.size(), arrays.size());
  EXPECT_EQ(r[69999].name, "a69999");
  EXPECT_EQ(r[69999].tensor.GetInt64(0), 69999);
  if (std::system("python3 -c 'import zipfile' >/dev/null 2>&1") == 0) {
    std::string cmd =
        "python3 -c \"import zipfile,sys; z=zipfile.ZipFile(sys.argv[1]); n=z.namelist(); "
        "assert len(n)==70000 and n[-1]=='a69999.npy', len(n)\" " +
        (dir / "many.npz");
    EXPECT_EQ(std::system(cmd.c_str()), 0);
  }
}

// A minimal zip writer for archives our writer never produces: data descriptors, ZIP64 extra fields.
struct ZipMember {
  std::string name;
  std::string data;  // uncompressed
  bool deflate = true;
  bool descriptor = false;  // sizes and CRC after the data (flag bit 3), zeros in the local header
  bool zip64 = false;       // 0xFFFFFFFF sizes in the central directory with a ZIP64 extra field
};

void P16(std::string& s, uint32_t v) {
  s += char(v & 0xff);
  s += char((v >> 8) & 0xff);
}
void P32(std::string& s, uint32_t v) {
  P16(s, v & 0xffff);
  P16(s, v >> 16);
}
void P64(std::string& s, uint64_t v) {
  P32(s, uint32_t(v));
  P32(s, uint32_t(v >> 32));
}

std::string ZlibRawDeflate(const std::string& in) {
  z_stream zs{};
  EXPECT_EQ(deflateInit2(&zs, 9, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&zs, in.size()), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = in.size();
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = out.size();
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

std::string MakeZip(const std::vector<ZipMember>& members, bool zip64_eocd) {
  std::string out, cd;
  for (const auto& m : members) {
    std::string body = m.deflate ? ZlibRawDeflate(m.data) : m.data;
    uint32_t crc = crc32(0, reinterpret_cast<const Bytef*>(m.data.data()), m.data.size());
    uint64_t off = out.size();
    P32(out, 0x04034b50);
    P16(out, 20);
    P16(out, m.descriptor ? 8 : 0);
    P16(out, m.deflate ? 8 : 0);
    P16(out, 0);
    P16(out, 0x21);
    P32(out, m.descriptor ? 0 : crc);
    P32(out, m.descriptor ? 0 : body.size());
    P32(out, m.descriptor ? 0 : m.data.size());
    P16(out, m.name.size());
    P16(out, 0);
    out += m.name + body;
    if (m.descriptor) {
      P32(out, 0x08074b50);
      P32(out, crc);
      P32(out, body.size());
      P32(out, m.data.size());
    }
    std::string extra;
    if (m.zip64) {
      P16(extra, 1);
      P16(extra, 24);
      P64(extra, m.data.size());
      P64(extra, body.size());
      P64(extra, off);
    }
    P32(cd, 0x02014b50);
    P16(cd, 45);
    P16(cd, 45);
    P16(cd, m.descriptor ? 8 : 0);
    P16(cd, m.deflate ? 8 : 0);
    P16(cd, 0);
    P16(cd, 0x21);
    P32(cd, crc);
    P32(cd, m.zip64 ? 0xffffffffu : body.size());
    P32(cd, m.zip64 ? 0xffffffffu : m.data.size());
    P16(cd, m.name.size());
    P16(cd, extra.size());
    P16(cd, 0);
    P16(cd, 0);
    P16(cd, 0);
    P32(cd, 0);
    P32(cd, m.zip64 ? 0xffffffffu : off);
    cd += m.name + extra;
  }
  uint64_t cd_off = out.size();
  out += cd;
  if (zip64_eocd) {
    uint64_t z = out.size();
    P32(out, 0x06064b50);
    P64(out, 44);
    P16(out, 45);
    P16(out, 45);
    P32(out, 0);
    P32(out, 0);
    P64(out, members.size());
    P64(out, members.size());
    P64(out, cd.size());
    P64(out, cd_off);
    P32(out, 0x07064b50);
    P32(out, 0);
    P64(out, z);
    P32(out, 1);
  }
  P32(out, 0x06054b50);
  P16(out, 0);
  P16(out, 0);
  P16(out, zip64_eocd ? 0xffff : members.size());
  P16(out, zip64_eocd ? 0xffff : members.size());
  P32(out, zip64_eocd ? 0xffffffffu : cd.size());
  P32(out, zip64_eocd ? 0xffffffffu : cd_off);
  P16(out, 5);
  out += "hello";  // an archive comment
  return out;
}

TEST(Npz, ZlibDeflatedWithDescriptorsAndZip64) {
  Tensor a = RandomBytes(DataType::kFloat32, {4, 4}, 11);
  Tensor b = Tensor(DataType::kInt32, {100});  // zeros: deflates to almost nothing
  Tensor c = RandomBytes(DataType::kUint8, {9}, 12);
  for (bool z64eocd : {false, true}) {
    std::string zip = MakeZip({{"a.npy", SerializeNpy(a), true, true, false},
                               {"b.npy", SerializeNpy(b), true, false, true},
                               {"c", SerializeNpy(c), false, true, true}},
                              z64eocd);
    auto r = ParseNpz(zip, "z.npz");
    ASSERT_EQ(r.size(), 3u);
    EXPECT_EQ(r[0].name, "a");
    EXPECT_TRUE(SameTensor(r[0].tensor, a));
    EXPECT_EQ(r[1].name, "b");
    EXPECT_TRUE(SameTensor(r[1].tensor, b));
    EXPECT_EQ(r[2].name, "c");  // a member without ".npy" keeps its name
    EXPECT_TRUE(SameTensor(r[2].tensor, c));
  }
}

TEST(Npz, CorruptArchives) {
  Tensor a = RandomBytes(DataType::kFloat32, {4, 4}, 13);
  std::string zip = MakeZip({{"a.npy", SerializeNpy(a), true, false, false}}, false);
  EXPECT_ERROR_HAS(ParseNpz("PK", "t.npz"), "t.npz: not a valid .npz/zip archive");
  EXPECT_ERROR_HAS(ParseNpz(zip.substr(0, zip.size() / 2), "t.npz"), "t.npz");
  // Flip a byte of the compressed data: CRC or inflate error, naming the member.
  std::string bad = zip;
  bad[30 + 5 + 10] ^= 0x55;
  EXPECT_ERROR_HAS(ParseNpz(bad, "t.npz"), "t.npz: member 'a.npy'");
  // A central directory that claims a 4 GiB member through ZIP64.
  std::string huge = MakeZip({{"a.npy", SerializeNpy(a), false, false, true}}, false);
  size_t pos = huge.find(std::string("\x01\x00\x18\x00", 4));
  ASSERT_NE(pos, std::string::npos);
  for (int k = 0; k < 8; ++k) huge[pos + 4 + k] = huge[pos + 12 + k] = (k == 4 ? 1 : 0);
  EXPECT_ERROR_HAS(ParseNpz(huge, "h.npz"), "h.npz: member 'a.npy'");
  // Claimed uncompressed size larger than what the deflate stream holds.
  std::string lie = MakeZip({{"a.npy", SerializeNpy(a), true, false, true}}, false);
  pos = lie.find(std::string("\x01\x00\x18\x00", 4));
  lie[pos + 4 + 5] = 0x10;  // uncompressed size += 2^40
  EXPECT_ERROR_HAS(ParseNpz(lie, "l.npz"), "declared");
  EXPECT_ERROR_HAS(ReadNpz("/nonexistent.npz"), "/nonexistent.npz: cannot open");
}

TEST(Npz, RandomCorruptionNeverCrashes) {
  TempDir dir;
  WriteNpz(dir / "a.npz", AllDtypeArrays(), true);
  std::string good = ReadBytes(dir / "a.npz");
  std::mt19937 rng(99);
  for (int trial = 0; trial < 1500; ++trial) {
    std::string b = good;
    int edits = 1 + rng() % 6;
    for (int k = 0; k < edits; ++k) b[rng() % b.size()] = static_cast<char>(rng());
    if (rng() % 5 == 0) b.erase(rng() % b.size(), 1 + rng() % 64);
    try {
      ParseNpz(b, "m.npz");
    } catch (const Error&) {
    }
  }
}

// Cross-check with Python's zipfile (numpy.load reads .npz through it) when python3 is present: it must
// read and CRC-check our archives, and archives it writes with data descriptors and ZIP64 must read here.
TEST(Npz, PythonZipfileCrossCheck) {
  if (std::system("python3 -c 'import zipfile' >/dev/null 2>&1") != 0) GTEST_SKIP() << "no python3";
  TempDir dir;
  auto arrays = AllDtypeArrays();
  WriteNpz(dir / "ours.npz", arrays, true);
  // What numpy.lib.format does with each member: the header must be a Python literal with exactly these keys,
  // the data must start 64-byte aligned and hold prod(shape) * itemsize bytes.
  WriteBytes(dir / "r.py",
             "import zipfile, sys, ast\n"
             "sizes = {'f4': 4, 'f8': 8, 'f2': 2, 'i1': 1, 'i2': 2, 'i4': 4, 'i8': 8, 'u1': 1, 'u2': 2, 'u4': 4,\n"
             "         'u8': 8, 'b1': 1}\n"
             "z = zipfile.ZipFile(sys.argv[1])\n"
             "assert z.testzip() is None\n"
             "names = z.namelist()\n"
             "assert len(names) == int(sys.argv[2]) and 'arr_float32.npy' in names, names\n"
             "for n in names:\n"
             "    d = z.read(n)\n"
             "    assert d[:8] == b'\\x93NUMPY\\x01\\x00', n\n"
             "    hl = d[8] | (d[9] << 8)\n"
             "    assert (10 + hl) % 64 == 0 and d[10 + hl - 1:10 + hl] == b'\\n', n\n"
             "    h = ast.literal_eval(d[10:10 + hl].decode('latin1'))\n"
             "    assert sorted(h) == ['descr', 'fortran_order', 'shape'] and h['fortran_order'] is False, h\n"
             "    count = 1\n"
             "    for s in h['shape']: count *= s\n"
             "    assert len(d) - 10 - hl == count * sizes[h['descr'][1:]], (n, h)\n");
  std::string check = "python3 " + (dir / "r.py") + " " + (dir / "ours.npz") + " " + std::to_string(arrays.size());
  EXPECT_EQ(std::system(check.c_str()), 0) << check;
  for (size_t i = 0; i < arrays.size(); ++i) {
    std::string member = "m";
    member += std::to_string(i);
    member += ".npy";
    WriteNpy(dir / member, arrays[i].tensor);
  }
  // Unseekable output -> data descriptors; force_zip64 -> ZIP64 extra fields.
  std::string script = dir / "w.py";
  WriteBytes(script,
             "import zipfile, sys\n"
             "names = sys.argv[2].split('|')\n"
             "class Pipe:\n"
             "    def __init__(self, f): self.f = f; self.n = 0\n"
             "    def write(self, b): self.f.write(b); self.n += len(b); return len(b)\n"
             "    def tell(self): return self.n\n"
             "    def flush(self): pass\n"
             "with open(sys.argv[1], 'wb') as raw:\n"
             "    with zipfile.ZipFile(Pipe(raw), 'w', zipfile.ZIP_DEFLATED) as z:\n"
             "        for i, n in enumerate(names):\n"
             "            with open(sys.argv[3] + '/m%d.npy' % i, 'rb') as f: data = f.read()\n"
             "            with z.open(n + '.npy', 'w', force_zip64=(i % 2 == 0)) as w: w.write(data)\n");
  std::string names;
  for (const auto& a : arrays) names += (names.empty() ? "" : "|") + a.name;
  std::string cmd = "python3 " + script + " " + (dir / "py.npz") + " '" + names + "' " + dir.path();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  ExpectSameArrays(arrays, ReadNpz(dir / "py.npz"));
}

}  // namespace
}  // namespace ot
