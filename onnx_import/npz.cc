// .npz = a zip archive of .npy members. The reader takes sizes from the central directory (so members written
// with data descriptors work), understands ZIP64 extra fields and records, inflates deflated members with raw
// zlib (windowBits -15), checks every offset and size against the archive length and every member's CRC-32.
// The writer produces what Python's zipfile (and so numpy.load) reads: stored or deflated members, ZIP64 when
// a size or offset needs it.
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>

#include "graph/error.h"
#include "onnx_import/file_util.h"
#include "onnx_import/npy_detail.h"
#include "onnx_import/tensor_io.h"

namespace ot {

namespace {

constexpr uint32_t kLocalSig = 0x04034b50, kCentralSig = 0x02014b50, kEocdSig = 0x06054b50;
constexpr uint32_t kZip64EocdSig = 0x06064b50, kZip64LocatorSig = 0x07064b50;

uint16_t Rd16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t Rd32(const uint8_t* p) { return Rd16(p) | (static_cast<uint32_t>(Rd16(p + 2)) << 16); }
uint64_t Rd64(const uint8_t* p) { return Rd32(p) | (static_cast<uint64_t>(Rd32(p + 4)) << 32); }

uint32_t Crc32(const uint8_t* p, size_t n) { return static_cast<uint32_t>(crc32_z(0L, p, n)); }

// Inflates a raw deflate stream of exactly `expected` bytes. Grows the output as data arrives, so a lying
// size field cannot make us allocate more than the stream really produces.
std::string Inflate(const uint8_t* src, uint64_t n, uint64_t expected, const std::string& what) {
  z_stream zs;
  std::memset(&zs, 0, sizeof(zs));
  if (inflateInit2(&zs, -15) != Z_OK) throw Error(what + ": zlib inflateInit failed");
  std::string out;
  uint64_t fed = 0;
  int ret = Z_OK;
  try {
    out.resize(static_cast<size_t>(std::min<uint64_t>(expected, std::max<uint64_t>(n * 4, 1 << 16))));
    size_t produced = 0;
    while (ret != Z_STREAM_END) {
      if (zs.avail_in == 0 && fed < n) {
        uInt chunk = static_cast<uInt>(std::min<uint64_t>(n - fed, 1u << 30));
        zs.next_in = const_cast<Bytef*>(src + fed);
        zs.avail_in = chunk;
        fed += chunk;
      }
      if (produced == out.size()) {
        if (out.size() >= expected) {
          // Declared size reached: the stream must end here without producing more.
          uint8_t probe;
          zs.next_out = &probe;
          zs.avail_out = 1;
          ret = inflate(&zs, Z_NO_FLUSH);
          if (ret == Z_STREAM_END && zs.avail_out == 1) break;
          if (zs.avail_out == 0)
            throw Error(what + ": deflated data is larger than its declared size " + std::to_string(expected));
          if (ret == Z_BUF_ERROR && zs.avail_in == 0 && fed >= n) throw Error(what + ": deflated data is truncated");
          if (ret != Z_OK) throw Error(what + ": corrupt deflated data");
          continue;
        }
        out.resize(static_cast<size_t>(std::min<uint64_t>(expected, out.size() * 2 + 1)));
      }
      size_t room = std::min<size_t>(out.size() - produced, 1u << 30);
      zs.next_out = reinterpret_cast<Bytef*>(out.data() + produced);
      zs.avail_out = static_cast<uInt>(room);
      ret = inflate(&zs, Z_NO_FLUSH);
      produced += room - zs.avail_out;
      if (ret == Z_STREAM_END) break;
      if (ret == Z_BUF_ERROR && zs.avail_in == 0 && fed >= n) throw Error(what + ": deflated data is truncated");
      if (ret != Z_OK && ret != Z_BUF_ERROR) throw Error(what + ": corrupt deflated data");
    }
    if (produced != expected)
      throw Error(what + ": deflated data holds " + std::to_string(produced) + " bytes, declared " +
                  std::to_string(expected));
    out.resize(produced);
  } catch (...) {
    inflateEnd(&zs);
    throw;
  }
  inflateEnd(&zs);
  return out;
}

std::vector<NamedTensor> ParseZip(const uint8_t* p, size_t n, const std::string& what) {
  auto bad = [&](const std::string& m) { return Error(what + ": not a valid .npz/zip archive (" + m + ")"); };
  if (n < 22) throw bad("too short");
  // End of central directory: the last signature within 64 KiB + 22 bytes of the end.
  size_t eocd = SIZE_MAX;
  size_t lowest = n > 22 + 65535 ? n - 22 - 65535 : 0;
  for (size_t i = n - 22 + 1; i-- > lowest;)
    if (Rd32(p + i) == kEocdSig && i + 22 + Rd16(p + i + 20) <= n) {
      eocd = i;
      break;
    }
  if (eocd == SIZE_MAX) throw bad("no end-of-central-directory record");
  uint64_t entries = Rd16(p + eocd + 10);
  uint64_t cd_size = Rd32(p + eocd + 12);
  uint64_t cd_off = Rd32(p + eocd + 16);
  if (Rd16(p + eocd + 4) != 0 || Rd16(p + eocd + 6) != 0) throw bad("multi-disk archives are not supported");
  if (entries == 0xffff || cd_size == 0xffffffffu || cd_off == 0xffffffffu) {
    if (eocd < 20 || Rd32(p + eocd - 20) != kZip64LocatorSig) throw bad("ZIP64 locator missing");
    uint64_t z64 = Rd64(p + eocd - 20 + 8);
    if (z64 > n || n - z64 < 56 || Rd32(p + z64) != kZip64EocdSig) throw bad("bad ZIP64 end record");
    entries = Rd64(p + z64 + 32);
    cd_size = Rd64(p + z64 + 40);
    cd_off = Rd64(p + z64 + 48);
  }
  if (cd_off > n || cd_size > n - cd_off) throw bad("central directory beyond the end of the file");
  if (entries > cd_size / 46) throw bad("entry count does not fit the central directory");

  std::vector<NamedTensor> out;
  std::set<std::string> names;
  uint64_t pos = cd_off;
  const uint64_t cd_end = cd_off + cd_size;
  for (uint64_t e = 0; e < entries; ++e) {
    if (cd_end - pos < 46 || Rd32(p + pos) != kCentralSig) throw bad("bad central directory entry");
    const uint8_t* c = p + pos;
    uint16_t flags = Rd16(c + 8), method = Rd16(c + 10);
    uint32_t crc = Rd32(c + 16);
    uint64_t comp = Rd32(c + 20), uncomp = Rd32(c + 24);
    uint16_t name_len = Rd16(c + 28), extra_len = Rd16(c + 30), comment_len = Rd16(c + 32);
    uint64_t local = Rd32(c + 42);
    if (cd_end - pos - 46 < uint64_t(name_len) + extra_len + comment_len)
      throw bad("central directory entry truncated");
    std::string name(reinterpret_cast<const char*>(c + 46), name_len);
    // ZIP64 extended information: the 64-bit values of the fields that hold 0xFFFFFFFF, in this order.
    const uint8_t* x = c + 46 + name_len;
    for (size_t k = 0; k + 4 <= extra_len;) {
      uint16_t id = Rd16(x + k), sz = Rd16(x + k + 2);
      if (k + 4 + sz > extra_len) throw bad("extra field overruns its entry");
      if (id == 0x0001) {
        size_t q = k + 4, end = k + 4 + sz;
        auto take = [&](uint64_t* v) {
          if (*v != 0xffffffffu) return;
          if (q + 8 > end) throw bad("ZIP64 extra field too short for '" + name + "'");
          *v = Rd64(x + q);
          q += 8;
        };
        take(&uncomp);
        take(&comp);
        take(&local);
      }
      k += 4 + sz;
    }
    pos += 46 + uint64_t(name_len) + extra_len + comment_len;
    if (!name.empty() && name.back() == '/') continue;  // a folder entry
    const std::string member = what + ": member '" + name + "'";
    if (flags & 1) throw UnsupportedError(member + " is encrypted");
    if (local > n || n - local < 30 || Rd32(p + local) != kLocalSig) throw bad("bad local header for '" + name + "'");
    uint64_t data = local + 30 + Rd16(p + local + 26) + Rd16(p + local + 28);
    if (data > n || comp > n - data) throw Error(member + ": data lies beyond the end of the file");
    std::string key =
        name.size() > 4 && name.compare(name.size() - 4, 4, ".npy") == 0 ? name.substr(0, name.size() - 4) : name;
    if (!names.insert(key).second) throw Error(member + " appears twice");
    NamedTensor nt;
    nt.name = key;
    if (method == 0) {
      if (comp != uncomp) throw Error(member + ": stored member with compressed size != size");
      if (Crc32(p + data, comp) != crc) throw Error(member + ": CRC-32 mismatch (corrupt archive)");
      nt.tensor = npy_detail::ParseNpyBytes(p + data, comp, member);
    } else if (method == 8) {
      std::string raw = Inflate(p + data, comp, uncomp, member);
      if (Crc32(reinterpret_cast<const uint8_t*>(raw.data()), raw.size()) != crc)
        throw Error(member + ": CRC-32 mismatch (corrupt archive)");
      nt.tensor = npy_detail::ParseNpyBytes(reinterpret_cast<const uint8_t*>(raw.data()), raw.size(), member);
    } else {
      throw UnsupportedError(member + ": compression method " + std::to_string(method) +
                             " is not supported (stored or deflated only)");
    }
    out.push_back(std::move(nt));
  }
  return out;
}

// --- writer --------------------------------------------------------------------------------------------------

void Put16(std::string& s, uint32_t v) {
  s += static_cast<char>(v & 0xff);
  s += static_cast<char>((v >> 8) & 0xff);
}
void Put32(std::string& s, uint32_t v) {
  Put16(s, v & 0xffff);
  Put16(s, v >> 16);
}
void Put64(std::string& s, uint64_t v) {
  Put32(s, static_cast<uint32_t>(v));
  Put32(s, static_cast<uint32_t>(v >> 32));
}

std::string Deflate(const std::string& in, const std::string& what) {
  z_stream zs;
  std::memset(&zs, 0, sizeof(zs));
  if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw Error(what + ": zlib deflateInit failed");
  std::string out(deflateBound(&zs, in.size()), '\0');
  size_t fed = 0, produced = 0;
  int ret = Z_OK;
  while (ret != Z_STREAM_END) {
    if (zs.avail_in == 0 && fed < in.size()) {
      uInt chunk = static_cast<uInt>(std::min<size_t>(in.size() - fed, 1u << 30));
      zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data() + fed));
      zs.avail_in = chunk;
      fed += chunk;
    }
    if (produced == out.size()) out.resize(out.size() * 2 + 64);
    size_t room = std::min<size_t>(out.size() - produced, 1u << 30);
    zs.next_out = reinterpret_cast<Bytef*>(out.data() + produced);
    zs.avail_out = static_cast<uInt>(room);
    ret = deflate(&zs, fed >= in.size() && zs.avail_in == 0 ? Z_FINISH : Z_NO_FLUSH);
    produced += room - zs.avail_out;
    if (ret == Z_STREAM_ERROR) {
      deflateEnd(&zs);
      throw Error(what + ": zlib deflate failed");
    }
  }
  deflateEnd(&zs);
  out.resize(produced);
  return out;
}

struct CentralEntry {
  std::string name;
  uint16_t method;
  uint32_t crc;
  uint64_t comp, uncomp, offset;
};

// Member names come from the file: keep messages on one line whatever they hold.
std::vector<NamedTensor> ParseZipOneLine(const uint8_t* p, size_t n, const std::string& what) {
  try {
    return ParseZip(p, n, what);
  } catch (const UnsupportedError& e) {
    throw UnsupportedError(io::OneLine(e.what()));
  } catch (const Error& e) {
    throw Error(io::OneLine(e.what()));
  }
}

}  // namespace

std::vector<NamedTensor> ParseNpz(const std::string& bytes, const std::string& what) {
  return ParseZipOneLine(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), what);
}

std::vector<NamedTensor> ReadNpz(const std::string& path) {
  io::MappedFile f(path);
  return ParseZipOneLine(f.data(), f.size(), path);
}

void WriteNpz(const std::string& path, const std::vector<NamedTensor>& tensors, bool compress) {
  std::set<std::string> seen;
  for (const auto& nt : tensors) {
    if (nt.name.empty()) throw Error(path + ": an array has an empty name");
    if (nt.name.size() > 60000) throw Error(path + ": array name is too long");
    if (!seen.insert(nt.name).second) throw Error(path + ": array '" + nt.name + "' is given twice");
  }
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw Error(path + ": cannot create (" + std::strerror(errno) + ")");
  uint64_t offset = 0;
  auto write = [&](const std::string& s) {
    if (!s.empty() && std::fwrite(s.data(), 1, s.size(), f) != s.size())
      throw Error(path + ": write failed (" + std::strerror(errno) + ")");
    offset += s.size();
  };
  std::vector<CentralEntry> entries;
  const uint16_t kUtf8 = 0x800;
  const uint16_t kDosTime = 0, kDosDate = (0 << 9) | (1 << 5) | 1;  // 1980-01-01 00:00: reproducible files
  try {
    for (const auto& nt : tensors) {
      CentralEntry ce;
      ce.name = nt.name + ".npy";
      std::string npy = SerializeNpy(nt.tensor);
      ce.uncomp = npy.size();
      ce.crc = Crc32(reinterpret_cast<const uint8_t*>(npy.data()), npy.size());
      std::string body;
      ce.method = 0;
      if (compress) {
        body = Deflate(npy, path);
        if (body.size() < npy.size())
          ce.method = 8;
        else
          body.clear();
      }
      const std::string& payload = ce.method == 8 ? body : npy;
      ce.comp = payload.size();
      ce.offset = offset;
      bool z64 = ce.comp >= 0xffffffffu || ce.uncomp >= 0xffffffffu;
      std::string h;
      Put32(h, kLocalSig);
      Put16(h, z64 ? 45 : 20);
      Put16(h, kUtf8);
      Put16(h, ce.method);
      Put16(h, kDosTime);
      Put16(h, kDosDate);
      Put32(h, ce.crc);
      Put32(h, z64 ? 0xffffffffu : static_cast<uint32_t>(ce.comp));
      Put32(h, z64 ? 0xffffffffu : static_cast<uint32_t>(ce.uncomp));
      Put16(h, static_cast<uint32_t>(ce.name.size()));
      Put16(h, z64 ? 20 : 0);
      h += ce.name;
      if (z64) {
        Put16(h, 0x0001);
        Put16(h, 16);
        Put64(h, ce.uncomp);
        Put64(h, ce.comp);
      }
      write(h);
      write(payload);
      entries.push_back(std::move(ce));
    }
    const uint64_t cd_off = offset;
    for (const auto& ce : entries) {
      std::string extra;
      if (ce.uncomp >= 0xffffffffu) Put64(extra, ce.uncomp);
      if (ce.comp >= 0xffffffffu) Put64(extra, ce.comp);
      if (ce.offset >= 0xffffffffu) Put64(extra, ce.offset);
      std::string z64extra;
      if (!extra.empty()) {
        Put16(z64extra, 0x0001);
        Put16(z64extra, static_cast<uint32_t>(extra.size()));
        z64extra += extra;
      }
      std::string h;
      Put32(h, kCentralSig);
      Put16(h, (3 << 8) | (z64extra.empty() ? 20 : 45));  // made by: Unix
      Put16(h, z64extra.empty() ? 20 : 45);
      Put16(h, kUtf8);
      Put16(h, ce.method);
      Put16(h, kDosTime);
      Put16(h, kDosDate);
      Put32(h, ce.crc);
      Put32(h, ce.comp >= 0xffffffffu ? 0xffffffffu : static_cast<uint32_t>(ce.comp));
      Put32(h, ce.uncomp >= 0xffffffffu ? 0xffffffffu : static_cast<uint32_t>(ce.uncomp));
      Put16(h, static_cast<uint32_t>(ce.name.size()));
      Put16(h, static_cast<uint32_t>(z64extra.size()));
      Put16(h, 0);               // comment
      Put16(h, 0);               // disk
      Put16(h, 0);               // internal attributes
      Put32(h, 0100644u << 16);  // external attributes: regular file, -rw-r--r--
      Put32(h, ce.offset >= 0xffffffffu ? 0xffffffffu : static_cast<uint32_t>(ce.offset));
      h += ce.name;
      h += z64extra;
      write(h);
    }
    const uint64_t cd_size = offset - cd_off;
    const uint64_t count = entries.size();
    bool z64 = count >= 0xffff || cd_off >= 0xffffffffu || cd_size >= 0xffffffffu;
    std::string t;
    if (z64) {
      uint64_t z64_off = offset;
      Put32(t, kZip64EocdSig);
      Put64(t, 44);
      Put16(t, 45);
      Put16(t, 45);
      Put32(t, 0);
      Put32(t, 0);
      Put64(t, count);
      Put64(t, count);
      Put64(t, cd_size);
      Put64(t, cd_off);
      Put32(t, kZip64LocatorSig);
      Put32(t, 0);
      Put64(t, z64_off);
      Put32(t, 1);
    }
    Put32(t, kEocdSig);
    Put16(t, 0);
    Put16(t, 0);
    Put16(t, z64 ? 0xffff : static_cast<uint32_t>(count));
    Put16(t, z64 ? 0xffff : static_cast<uint32_t>(count));
    Put32(t, z64 ? 0xffffffffu : static_cast<uint32_t>(cd_size));
    Put32(t, z64 ? 0xffffffffu : static_cast<uint32_t>(cd_off));
    Put16(t, 0);
    write(t);
  } catch (...) {
    std::fclose(f);
    throw;
  }
  if (std::fclose(f) != 0) throw Error(path + ": write failed (" + std::strerror(errno) + ")");
}

}  // namespace ot
