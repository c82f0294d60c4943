#include "cpu_ops/matmul.h"

#include <omp.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>
#include <tbb/task_arena.h>

#include <cstring>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "cpu_ops/dims.h"
#include "cpu_ops/dnnl_half.h"
#include "cpu_ops/dnnl_util.h"
#include "kernel_common/half.h"
#include "kernel_common/host_alloc.h"

namespace ot::cpu {

namespace {

using dt = dnnl::memory::data_type;

// Row-major strides of dims.
// Logical dims [batch..., rows, cols] of a matrix stored as [batch..., cols, rows] when transposed.
dnnl::memory::desc MatrixDesc(const std::vector<int64_t>& batch, int64_t rows, int64_t cols, bool trans, dt t) {
  dnnl::memory::dims dims(batch.begin(), batch.end());
  dims.push_back(rows);
  dims.push_back(cols);
  dnnl::memory::dims phys = dims;
  if (trans) std::swap(phys[phys.size() - 1], phys[phys.size() - 2]);
  dnnl::memory::dims s = Contiguous(phys);
  if (trans) std::swap(s[s.size() - 1], s[s.size() - 2]);
  return dnnl::memory::desc(dims, t, s);
}

}  // namespace

struct DnnlMatMul::Impl {
  // User-managed scratchpad owned by this primitive (see DnnlConv::Impl).
  // Allocated on the first Run without a caller's workspace.
  dnnl::memory::desc scratch_md;
  mutable std::once_flag scratch_once;
  mutable std::shared_ptr<HostVector<uint8_t>> scratch;
  size_t scratch_bytes = 0, a_off = 0, b_off = 0, c_off = 0, ws_bytes = 0;  // workspace layout
  dnnl::matmul prim;
  dnnl::memory::desc a_md, b_md, c_md;
  bool convert = false;  // primitive runs in f32 on converted copies
  std::string impl;      // oneDNN's implementation name (for reports)
  int64_t a_elems = 0, b_elems = 0, c_elems = 0;
  bool empty = false;   // some output dim is 0: nothing to do
  bool k_zero = false;  // K == 0: C = 0 (or unchanged when accumulating)
  // Blocks (SplitOf below): `parts` one-thread primitives over blocks of C -- rows [p * block, ...) of C, or its
  // columns when `cols` -- run as TBB tasks; the last block may be shorter (prim_tail). parts == 1: `prim` with
  // oneDNN's own OpenMP team.
  int parts = 1;
  bool cols = false;
  int team = 1;  // oneDNN's OpenMP team for the whole-matrix call (parts == 1)
  int64_t block = 0;
  dnnl::matmul prim_tail;
  dnnl::memory::desc a_block_md, b_block_md, c_block_md, a_tail_md, b_tail_md, c_tail_md;
  size_t scratch_stride = 0;  // bytes between the blocks' scratchpads
  // Converting a large unbatched product (TileSizes): C in row chunks of mc rows, each over K in chunks of kc, the
  // f32 copies holding one tile of A, B and C at a time. The row chunks are split into `slices` contiguous groups run
  // in parallel, each on its own slice_bytes of the workspace (its scratchpad, then its A, B and C tiles).
  // tile[first][k tail][m tail]: one-thread primitives, the first K chunk's without a sum (unless the spec
  // accumulates), the last K or row chunk's over its own length.
  int64_t mc = 0, kc = 0;  // 0: whole copies
  int slices = 1;
  size_t slice_bytes = 0, tile_a_off = 0, tile_b_off = 0, tile_c_off = 0;
  dnnl::matmul tile[2][2][2];
  dnnl::memory::desc tile_a[2][2], tile_b[2], tile_c[2], tile_scratch_md;
};

namespace {

// The [rows, cols] corner of a [rows_total, cols_total] matrix (stored [cols_total, rows_total] when trans): the
// descriptor of one block, with the whole matrix's strides.
dnnl::memory::desc BlockDesc(size_t batch_rank, int64_t rows, int64_t cols, int64_t rows_total, int64_t cols_total,
                             bool trans, dt t) {
  dnnl::memory::dims dims(batch_rank, 1), strides(batch_rank, rows_total * cols_total);
  dims.push_back(rows);
  dims.push_back(cols);
  strides.push_back(trans ? 1 : cols_total);
  strides.push_back(trans ? rows_total : 1);
  return dnnl::memory::desc(dims, t, strides);
}

// A GEMM on more than one thread runs as blocks of C, one oneDNN call on one thread each, parallel through TBB,
// instead of oneDNN's own OpenMP team: where the OpenMP workers sleep between parallel regions
// (OMP_WAIT_POLICY=PASSIVE, as under mpirun/srun; tools/main.cc), waking them cost each call about what the second
// thread gained (1024x64x256 after a TBB kernel, 2 threads: 0.89x of one thread), while TBB's threads are awake. Only
// unbatched products with at least kMinBlockRows rows (kMinBlockCols columns) per block and kMinFlops of work; the
// split depends only on the shape, the type and the thread count, so a run is repeatable.
constexpr int64_t kMinBlockRows = 32;
constexpr int64_t kMinBlockCols = 64;
constexpr double kMinFlops = 2e6;
// A half product with a transposed A (a weight gradient, A^T dY) runs as column blocks from kMinTransASplitK rows of
// A and kMinTransASplitFlops of work, else as one call on oneDNN's team: oneDNN 2.6's brgemm (AMX) takes the whole
// transposed A but not a block of it, and a block falls to its gemm driver (row and column blocks alike), whose fixed
// costs per call only large products repay. 2 threads, AMX, ms: [768, 788]^T x [788, 3072] (ViT-B's MLP, 3.7 GFLOP)
// 2.7 split against 3.8 on the team, [768, 788]^T x [788, 2304] 1.9 against 2.9; about level at 0.9 GFLOP
// ([768, 788]^T x [788, 768], DeiT-S's MLP); slower below (CaiT-XXS's [192, 784]^T x [784, 768] 0.38 against 0.32,
// its step 1.38x slower with them split) or with a short K (BERT's and T5-small's K = 512: [768, 512]^T x
// [512, 3072] 2.1 against 1.65). Steps with the large ones split: ViT-B/16 bf16 0.94x, Swin-T 0.92x, MLP-Mixer 0.94x
// (bench/RESULTS.md).
constexpr int64_t kMinTransASplitK = 768;
constexpr double kMinTransASplitFlops = 1.5e9;

// A GEMM that stays one call gets oneDNN's OpenMP team of --threads only from kMinTeamFlops of work: a sleeping
// worker's wake-up costs tens of microseconds here (a 2.1 MFLOP GEMM on a team of 2: 0.35x of one thread; the
// 50x784x128 of the digits MLP no faster), and the GEMMs below this bound take about that long alone.
constexpr double kMinTeamFlops = 64e6;

// Converted copies above this many bytes are made a tile at a time: a weight gradient over many rows ([17, 7936] x
// [7936, 128]) or the input gradient of a classifier ([7936, 17] x [17, 128]) would otherwise hold a whole operand or
// product in f32 (4.4 MB).
constexpr size_t kMaxConvertBytes = size_t{1} << 20;
constexpr int64_t kTileFloats = 65536;  // f32 elements of one tile's A, B and C copies together (256 KB)

// The tile (rows of C, K) of a converted unbatched product whose whole f32 copies would exceed kMaxConvertBytes;
// {0, 0} otherwise.
std::pair<int64_t, int64_t> TileSizes(const MatMulSpec& s, int64_t batches) {
  const size_t bytes = static_cast<size_t>(s.m * s.k + s.k * s.n + s.m * s.n) * sizeof(float);
  if (batches != 1 || bytes <= kMaxConvertBytes) return {0, 0};
  int64_t kc = std::min<int64_t>(s.k, 256);
  if (kc * s.n > kTileFloats / 2) kc = std::min<int64_t>(s.k, std::max<int64_t>(16, kTileFloats / 2 / s.n));
  const int64_t mc = std::min<int64_t>(s.m, std::max<int64_t>(16, (kTileFloats - kc * s.n) / (kc + s.n)));
  return {mc, kc};
}

// How a GEMM runs on several threads: in `parts` blocks of C's rows, or of its columns (cols), or as one call
// (parts == 1).
struct Split {
  int parts = 1;
  bool cols = false;
};

Split SplitOf(const MatMulSpec& spec, int64_t batches) {
  const int threads = OmpThreads();
  if (threads < 2 || batches != 1 || GemmFlops(spec) < kMinFlops) return {};
  if (spec.type != DnnType::kF32 && spec.trans_a) {
    const bool split = spec.k >= kMinTransASplitK && GemmFlops(spec) >= kMinTransASplitFlops;
    const int64_t parts = split ? std::min<int64_t>(threads, spec.n / kMinBlockCols) : 1;
    return parts > 1 ? Split{static_cast<int>(parts), true} : Split{};
  }
  return {static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, spec.m / kMinBlockRows))), false};
}

}  // namespace

DnnlMatMul::DnnlMatMul(const MatMulSpec& spec) : spec_(spec), impl_(std::make_shared<Impl>()) {
  // oneDNN's GEMM drivers index with 32-bit integers in places: larger sizes are refused here, not left to fail
  // inside the library (a division by zero when a size wraps to 0).
  constexpr int64_t kMax = INT32_MAX;
  int64_t batch = 1;
  for (size_t i = 0; i < spec.a_batch.size(); ++i) batch *= std::max(spec.a_batch[i], spec.b_batch[i]);
  if (spec.m > kMax || spec.k > kMax || spec.n > kMax || batch > kMax || spec.m * spec.k > kMax * 64 ||
      spec.k * spec.n > kMax * 64 || spec.m * spec.n > kMax * 64)
    throw std::invalid_argument("GEMM of M=" + std::to_string(spec.m) + " K=" + std::to_string(spec.k) +
                                " N=" + std::to_string(spec.n) + " (batch " + std::to_string(batch) +
                                ") is larger than oneDNN takes (each size at most 2^31-1)");
  Impl& im = *impl_;
  std::vector<int64_t> c_batch(spec.a_batch.size());
  for (size_t i = 0; i < c_batch.size(); ++i) c_batch[i] = std::max(spec.a_batch[i], spec.b_batch[i]);
  for (size_t i = 0; i < c_batch.size(); ++i)
    if (spec.a_batch[i] == 0 || spec.b_batch[i] == 0) c_batch[i] = 0;
  im.a_elems = Prod(spec.a_batch) * spec.m * spec.k;
  im.b_elems = Prod(spec.b_batch) * spec.k * spec.n;
  im.c_elems = Prod(c_batch) * spec.m * spec.n;
  if (im.c_elems == 0) {
    im.empty = true;
    return;
  }
  if (spec.k == 0) {
    im.k_zero = true;
    return;
  }
  // Before creating the primitive too: oneDNN sizes it for the team of the thread that creates it (dnnl_util.h).
  im.team = GemmFlops(spec) >= kMinTeamFlops ? OmpThreads() : 1;
  omp_set_num_threads(im.team);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (spec.alpha != 1.0f) attr.set_output_scales(0, {spec.alpha});
  if (spec.accumulate) {
    dnnl::post_ops po;
    po.append_sum(1.0f);
    attr.set_post_ops(po);
  }
  const Split split = SplitOf(spec, Prod(c_batch));
  im.parts = split.parts;
  im.cols = split.cols;
  const int64_t extent = im.cols ? spec.n : spec.m;  // of C along the split
  if (im.parts > 1) {
    im.block = (extent + im.parts - 1) / im.parts;
    im.parts = static_cast<int>((extent + im.block - 1) / im.block);
    im.team = 1;
    omp_set_num_threads(1);  // each block's primitive is made for the one thread that runs it
  }
  auto make = [&](dt t) {
    im.a_md = MatrixDesc(spec.a_batch, spec.m, spec.k, spec.trans_a, t);
    im.b_md = MatrixDesc(spec.b_batch, spec.k, spec.n, spec.trans_b, t);
    im.c_md = MatrixDesc(c_batch, spec.m, spec.n, false, t);
    // A block of `len` rows or columns: A's rows and C's, or B's columns and C's.
    auto block_descs = [&](int64_t len, dnnl::memory::desc* a, dnnl::memory::desc* b, dnnl::memory::desc* c) {
      const int64_t rows = im.cols ? spec.m : len, cols = im.cols ? len : spec.n;
      *a = im.cols ? im.a_md : BlockDesc(spec.a_batch.size(), rows, spec.k, spec.m, spec.k, spec.trans_a, t);
      *b = im.cols ? BlockDesc(spec.b_batch.size(), spec.k, cols, spec.k, spec.n, spec.trans_b, t) : im.b_md;
      *c = BlockDesc(c_batch.size(), rows, cols, spec.m, spec.n, false, t);
    };
    dnnl::memory::desc a_md = im.a_md, b_md = im.b_md, c_md = im.c_md;
    if (im.parts > 1) {
      block_descs(im.block, &im.a_block_md, &im.b_block_md, &im.c_block_md);
      a_md = im.a_block_md, b_md = im.b_block_md, c_md = im.c_block_md;
    }
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), attr, DnnlEngine());
    if (t != dt::f32 && GetHalfGemmMode() == HalfGemmMode::kAuto && IsReferenceImpl(pd.impl_info_str()))
      throw NotNativeHalf{};
    im.impl = pd.impl_info_str();
    im.scratch_md = pd.scratchpad_desc();
    im.prim = dnnl::matmul(pd);
    const int64_t tail = extent - (im.parts - 1) * im.block;
    if (im.parts > 1 && tail != im.block) {
      block_descs(tail, &im.a_tail_md, &im.b_tail_md, &im.c_tail_md);
      dnnl::matmul::primitive_desc tpd(dnnl::matmul::desc(im.a_tail_md, im.b_tail_md, im.c_tail_md), attr,
                                       DnnlEngine());
      im.prim_tail = dnnl::matmul(tpd);
      if (tpd.scratchpad_desc().get_size() > im.scratch_md.get_size()) im.scratch_md = tpd.scratchpad_desc();
    }
  };
  if (spec.type == DnnType::kF32) {
    make(dt::f32);
  } else {
    // A native half primitive when oneDNN has a real (jit) one; otherwise f32 on converted copies.
    im.convert = MakeNativeHalfOrConvert(spec.type, make);
    if (im.convert) make(dt::f32);
    if (im.convert) std::tie(im.mc, im.kc) = TileSizes(spec, Prod(c_batch));
  }
  if (im.kc > 0) MakeTiles(spec);
  // Workspace: the scratchpad (one per block), then (converting) the f32 copies of A, B and C, each 64-byte
  // aligned.
  auto align = [](size_t n) { return (n + 63) / 64 * 64; };
  im.scratch_stride = align(std::max<size_t>(im.scratch_md.get_size(), 1));
  im.scratch_bytes = im.parts > 1 ? im.scratch_stride * static_cast<size_t>(im.parts) : im.scratch_md.get_size();
  im.a_off = align(im.scratch_bytes);
  im.b_off = im.a_off + (im.convert ? align(static_cast<size_t>(im.a_elems) * sizeof(float)) : 0);
  im.c_off = im.b_off + (im.convert ? align(static_cast<size_t>(im.b_elems) * sizeof(float)) : 0);
  im.ws_bytes = im.c_off + (im.convert ? align(static_cast<size_t>(im.c_elems) * sizeof(float)) : 0);
  if (im.kc > 0) im.ws_bytes = im.slice_bytes * static_cast<size_t>(im.slices);
}

std::string DnnlMatMul::impl_name() const {
  const Impl& im = *impl_;
  return im.impl.empty() ? std::string("none") : im.impl + (im.convert ? " (f32 on converted operands)" : "");
}

size_t DnnlMatMul::workspace_bytes() const { return impl_->ws_bytes; }

size_t DnnlMatMul::heap_bytes() const {
  const Impl& im = *impl_;
  size_t bytes = DnnlCallHeapBytes(4);
  if (im.impl.rfind("gemm:", 0) == 0) {
    // oneDNN's gemm driver (chosen where brgemm cannot take the operands: a block of a transposed A, a column block of
    // B) mallocs its packing buffers in every call. Measured per one-thread call on AVX512-BF16, k = 2048: f32 ~78 KB
    // whatever m and n; bf16 ~68 KB + 0.76 k (m + n) bytes (m 32..128 rows, n 64..256). Declared: 80 KB, plus
    // k (m + n) bytes for a half type, per call that can run at once (the blocks on TBB's threads, or the OpenMP
    // team), m and n a block's.
    const int calls = std::max(im.parts, im.team);
    const bool rows = im.parts > 1 && !im.cols, cols = im.parts > 1 && im.cols;
    const size_t m = static_cast<size_t>(rows ? im.block : spec_.m), n = static_cast<size_t>(cols ? im.block : spec_.n);
    size_t per_call = size_t{80} << 10;
    if (spec_.type != DnnType::kF32 && !im.convert) per_call += static_cast<size_t>(spec_.k) * (m + n);
    bytes += static_cast<size_t>(calls) * per_call;
  }
  return bytes;
}

int DnnlMatMul::blocks() const { return impl_->parts; }

bool DnnlMatMul::column_blocks() const { return impl_->parts > 1 && impl_->cols; }

DnnlMatMul::~DnnlMatMul() = default;

void DnnlMatMul::Run(const void* a, const void* b, void* c, void* workspace) const {
  const Impl& im = *impl_;
  if (im.empty) return;
  const size_t esz = DnnTypeSize(spec_.type);
  if (im.k_zero) {
    if (!spec_.accumulate) std::memset(c, 0, static_cast<size_t>(im.c_elems) * esz);
    return;
  }
  if (im.kc > 0) {
    RunTiles(a, b, c, workspace);
    return;
  }
  omp_set_num_threads(im.team);
  uint8_t* ws = static_cast<uint8_t*>(workspace);
  void* scratch = ws;
  if (!ws) {
    std::call_once(im.scratch_once,
                   [&] { im.scratch = std::make_shared<HostVector<uint8_t>>(std::max<size_t>(im.scratch_bytes, 64)); });
    scratch = im.scratch->data();
  }
  if (!im.convert) {
    Execute(a, b, c, scratch);
    return;
  }
  std::unique_ptr<float[]> own_a, own_b, own_c;
  float *af, *bf, *cf;
  if (ws) {
    af = reinterpret_cast<float*>(ws + im.a_off);
    bf = reinterpret_cast<float*>(ws + im.b_off);
    cf = reinterpret_cast<float*>(ws + im.c_off);
  } else {
    own_a = NewFloats(im.a_elems);
    own_b = NewFloats(im.b_elems);
    own_c = NewFloats(im.c_elems);
    af = own_a.get();
    bf = own_b.get();
    cf = own_c.get();
  }
  ToFloat(spec_.type, a, af, im.a_elems);
  ToFloat(spec_.type, b, bf, im.b_elems);
  if (spec_.accumulate) ToFloat(spec_.type, c, cf, im.c_elems);
  Execute(af, bf, cf, scratch);
  FromFloat(spec_.type, cf, c, im.c_elems);
}

void DnnlMatMul::MakeTiles(const MatMulSpec& s) {
  Impl& im = *impl_;
  const int64_t row_chunks = (s.m + im.mc - 1) / im.mc;
  im.slices = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(OmpThreads(), row_chunks)));
  const int64_t k_tail = s.k - (s.k - 1) / im.kc * im.kc, m_tail = s.m - (s.m - 1) / im.mc * im.mc;
  omp_set_num_threads(1);  // each tile runs on one thread (the slices in parallel)
  for (int kt = 0; kt < 2; ++kt) {
    const int64_t kl = kt ? k_tail : im.kc;
    im.tile_b[kt] = MatrixDesc({}, kl, s.n, s.trans_b, dt::f32);
    for (int mt = 0; mt < 2; ++mt) {
      const int64_t ml = mt ? m_tail : im.mc;
      im.tile_a[kt][mt] = MatrixDesc({}, ml, kl, s.trans_a, dt::f32);
      im.tile_c[mt] = MatrixDesc({}, ml, s.n, false, dt::f32);
      for (int first = 0; first < 2; ++first) {
        dnnl::primitive_attr attr;
        attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
        if (s.alpha != 1.0f) attr.set_output_scales(0, {s.alpha});
        if (!first || s.accumulate) {
          dnnl::post_ops po;
          po.append_sum(1.0f);
          attr.set_post_ops(po);
        }
        dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(im.tile_a[kt][mt], im.tile_b[kt], im.tile_c[mt]), attr,
                                        DnnlEngine());
        if (pd.scratchpad_desc().get_size() > im.tile_scratch_md.get_size()) im.tile_scratch_md = pd.scratchpad_desc();
        im.tile[first][kt][mt] = dnnl::matmul(pd);
      }
    }
  }
  auto align = [](size_t n) { return (n + 63) / 64 * 64; };
  im.tile_a_off = align(im.tile_scratch_md.get_size());
  im.tile_b_off = im.tile_a_off + align(static_cast<size_t>(im.mc * im.kc) * sizeof(float));
  im.tile_c_off = im.tile_b_off + align(static_cast<size_t>(im.kc * s.n) * sizeof(float));
  im.slice_bytes = im.tile_c_off + align(static_cast<size_t>(im.mc * s.n) * sizeof(float));
}

void DnnlMatMul::RunTiles(const void* a, const void* b, void* c, void* workspace) const {
  const Impl& im = *impl_;
  const MatMulSpec& s = spec_;
  const size_t esz = DnnTypeSize(s.type);
  auto at = [&](const void* p, int64_t e) { return static_cast<const uint8_t*>(p) + e * static_cast<int64_t>(esz); };
  std::vector<uint8_t> own;
  uint8_t* ws = static_cast<uint8_t*>(workspace);
  if (!ws) {
    own.resize(im.slice_bytes * static_cast<size_t>(im.slices));
    ws = own.data();
  }
  const int64_t row_chunks = (s.m + im.mc - 1) / im.mc;
  dnnl::engine& eng = DnnlEngine();
  // Slice p: row chunks [p R / slices, (p + 1) R / slices), each over every K chunk.
  auto slice = [&](int p) {
    omp_set_num_threads(1);
    uint8_t* mine = ws + static_cast<size_t>(p) * im.slice_bytes;
    float* af = reinterpret_cast<float*>(mine + im.tile_a_off);
    float* bf = reinterpret_cast<float*>(mine + im.tile_b_off);
    float* cf = reinterpret_cast<float*>(mine + im.tile_c_off);
    dnnl::stream st(eng);
    for (int64_t rc = row_chunks * p / im.slices; rc < row_chunks * (p + 1) / im.slices; ++rc) {
      const int64_t r0 = rc * im.mc, ml = std::min(im.mc, s.m - r0);
      const int mt = ml != im.mc;
      if (s.accumulate) ToFloat(s.type, at(c, r0 * s.n), cf, ml * s.n);
      for (int64_t k0 = 0; k0 < s.k; k0 += im.kc) {
        const int64_t kl = std::min(im.kc, s.k - k0);
        const int kt = kl != im.kc;
        // A's rows [r0, r0 + ml) and columns [k0, k0 + kl), stored [kl, ml] when transposed; B's rows [k0, k0 + kl)
        // (stored [n, kl] when transposed).
        if (s.trans_a)
          for (int64_t kk = 0; kk < kl; ++kk) ToFloat(s.type, at(a, (k0 + kk) * s.m + r0), af + kk * ml, ml);
        else
          for (int64_t i = 0; i < ml; ++i) ToFloat(s.type, at(a, (r0 + i) * s.k + k0), af + i * kl, kl);
        if (s.trans_b)
          for (int64_t j = 0; j < s.n; ++j) ToFloat(s.type, at(b, j * s.k + k0), bf + j * kl, kl);
        else
          ToFloat(s.type, at(b, k0 * s.n), bf, kl * s.n);
        dnnl::memory am(im.tile_a[kt][mt], eng, af), bm(im.tile_b[kt], eng, bf), cm(im.tile_c[mt], eng, cf);
        im.tile[k0 == 0 ? 1 : 0][kt][mt].execute(st,
                                                 {{DNNL_ARG_SRC, am},
                                                  {DNNL_ARG_WEIGHTS, bm},
                                                  {DNNL_ARG_DST, cm},
                                                  {DNNL_ARG_SCRATCHPAD, dnnl::memory(im.tile_scratch_md, eng, mine)}});
        st.wait();
      }
      FromFloat(s.type, cf, static_cast<uint8_t*>(c) + r0 * s.n * static_cast<int64_t>(esz), ml * s.n);
    }
  };
  tbb::this_task_arena::isolate([&] {
    tbb::parallel_for(
        tbb::blocked_range<int>(0, im.slices, 1),
        [&](const tbb::blocked_range<int>& r) {
          for (int p = r.begin(); p < r.end(); ++p) slice(p);
        },
        tbb::simple_partitioner());
  });
}

void DnnlMatMul::Execute(const void* a, const void* b, void* c, void* scratch) const {
  const Impl& im = *impl_;
  dnnl::engine& eng = DnnlEngine();
  if (im.parts == 1) {
    dnnl::stream& s = DnnlStream();
    dnnl::memory am(im.a_md, eng, const_cast<void*>(a));
    dnnl::memory bm(im.b_md, eng, const_cast<void*>(b));
    dnnl::memory cm(im.c_md, eng, c);
    im.prim.execute(s, {{DNNL_ARG_SRC, am},
                        {DNNL_ARG_WEIGHTS, bm},
                        {DNNL_ARG_DST, cm},
                        {DNNL_ARG_SCRATCHPAD, dnnl::memory(im.scratch_md, eng, scratch)}});
    s.wait();
    return;
  }
  // Blocks as TBB tasks, each one oneDNN call on its thread's own one-thread OpenMP team, on a stream of its own (a
  // oneDNN stream is not for concurrent use). Isolated: a thread waiting for the blocks runs only blocks, never
  // another kernel of the step (which might wait for the executor's kernel lock).
  const int64_t esz = static_cast<int64_t>(im.convert ? sizeof(float) : DnnTypeSize(spec_.type));
  // Element offsets of a block's first row (column) in A (B) and C, per row (column).
  const int64_t a_step = im.cols ? 0 : (spec_.trans_a ? 1 : spec_.k);
  const int64_t b_step = im.cols ? (spec_.trans_b ? spec_.k : 1) : 0;
  const int64_t c_step = im.cols ? 1 : spec_.n;
  auto block = [&](int p) {
    omp_set_num_threads(1);
    const bool tail = im.prim_tail && p == im.parts - 1;
    const int64_t i0 = static_cast<int64_t>(p) * im.block;
    dnnl::stream s(eng);
    dnnl::memory am(tail ? im.a_tail_md : im.a_block_md, eng,
                    const_cast<uint8_t*>(static_cast<const uint8_t*>(a)) + i0 * a_step * esz);
    dnnl::memory bm(tail ? im.b_tail_md : im.b_block_md, eng,
                    const_cast<uint8_t*>(static_cast<const uint8_t*>(b)) + i0 * b_step * esz);
    dnnl::memory cm(tail ? im.c_tail_md : im.c_block_md, eng, static_cast<uint8_t*>(c) + i0 * c_step * esz);
    (tail ? im.prim_tail : im.prim)
        .execute(s, {{DNNL_ARG_SRC, am},
                     {DNNL_ARG_WEIGHTS, bm},
                     {DNNL_ARG_DST, cm},
                     {DNNL_ARG_SCRATCHPAD,
                      dnnl::memory(im.scratch_md, eng, static_cast<uint8_t*>(scratch) + p * im.scratch_stride)}});
    s.wait();
  };
  tbb::this_task_arena::isolate([&] {
    tbb::parallel_for(
        tbb::blocked_range<int>(0, im.parts, 1),
        [&](const tbb::blocked_range<int>& r) {
          for (int p = r.begin(); p < r.end(); ++p) block(p);
        },
        tbb::simple_partitioner());
  });
}

template <typename T, typename Acc>
void NaiveMatMul(const MatMulSpec& spec, const T* a, const T* b, T* c) {
  const MatMulBatch batch(spec);
  const int64_t batches = batch.count();
  const int64_t M = spec.m, N = spec.n, K = spec.k;
  if (batches * M * N == 0) return;
  const int64_t a_rs = spec.trans_a ? 1 : K, a_ks = spec.trans_a ? M : 1;
  const int64_t b_ks = spec.trans_b ? 1 : N, b_cs = spec.trans_b ? K : 1;
  const Acc alpha = static_cast<Acc>(spec.alpha);
  tbb::parallel_for(int64_t{0}, batches * M, [&](int64_t row) {
    const int64_t bi = row / M, i = row % M;
    int64_t ao = 0, bo = 0;
    batch.Offsets(bi, &ao, &bo);
    const T* ar = a + ao + i * a_rs;
    T* cr = c + row * N;
    for (int64_t j = 0; j < N; ++j) {
      const T* bc = b + bo + j * b_cs;
      Acc acc = 0;
      for (int64_t kk = 0; kk < K; ++kk) acc += static_cast<Acc>(ar[kk * a_ks]) * static_cast<Acc>(bc[kk * b_ks]);
      if (spec.alpha != 1.0f) acc = acc * alpha;
      if (spec.accumulate) acc += static_cast<Acc>(cr[j]);
      cr[j] = static_cast<T>(acc);
    }
  });
}

template <typename T>
void FillScaledBroadcast2D(const T* c, int64_t cs_m, int64_t cs_n, float beta, int64_t m, int64_t n, T* y) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      if constexpr (std::is_same_v<T, double>)
        y[i * n + j] = static_cast<double>(beta) * c[i * cs_m + j * cs_n];
      else if constexpr (std::is_integral_v<T>)
        y[i * n + j] = static_cast<T>(static_cast<double>(beta) * static_cast<double>(c[i * cs_m + j * cs_n]));
      else
        y[i * n + j] = static_cast<T>(beta * static_cast<float>(c[i * cs_m + j * cs_n]));
    }
}

template void NaiveMatMul<double, double>(const MatMulSpec&, const double*, const double*, double*);
template void NaiveMatMul<float, double>(const MatMulSpec&, const float*, const float*, float*);
template void NaiveMatMul<float16, double>(const MatMulSpec&, const float16*, const float16*, float16*);
template void NaiveMatMul<bfloat16, double>(const MatMulSpec&, const bfloat16*, const bfloat16*, bfloat16*);
template void NaiveMatMul<int32_t, int64_t>(const MatMulSpec&, const int32_t*, const int32_t*, int32_t*);
template void NaiveMatMul<int64_t, int64_t>(const MatMulSpec&, const int64_t*, const int64_t*, int64_t*);
template void NaiveMatMul<uint32_t, uint64_t>(const MatMulSpec&, const uint32_t*, const uint32_t*, uint32_t*);
template void NaiveMatMul<uint64_t, uint64_t>(const MatMulSpec&, const uint64_t*, const uint64_t*, uint64_t*);
template void FillScaledBroadcast2D<float>(const float*, int64_t, int64_t, float, int64_t, int64_t, float*);
template void FillScaledBroadcast2D<double>(const double*, int64_t, int64_t, float, int64_t, int64_t, double*);
template void FillScaledBroadcast2D<float16>(const float16*, int64_t, int64_t, float, int64_t, int64_t, float16*);
template void FillScaledBroadcast2D<bfloat16>(const bfloat16*, int64_t, int64_t, float, int64_t, int64_t, bfloat16*);
template void FillScaledBroadcast2D<int32_t>(const int32_t*, int64_t, int64_t, float, int64_t, int64_t, int32_t*);
template void FillScaledBroadcast2D<int64_t>(const int64_t*, int64_t, int64_t, float, int64_t, int64_t, int64_t*);
template void FillScaledBroadcast2D<uint32_t>(const uint32_t*, int64_t, int64_t, float, int64_t, int64_t, uint32_t*);
template void FillScaledBroadcast2D<uint64_t>(const uint64_t*, int64_t, int64_t, float, int64_t, int64_t, uint64_t*);

}  // namespace ot::cpu
