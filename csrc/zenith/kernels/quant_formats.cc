// Scalar references of the quantized formats: dequantization (the judge), the activation
// quantizer, and the integer dot products the SIMD kernels are held to. Layouts and the
// arithmetic each dot product does are described in quant_formats.h.
//
// Compiled with -ffp-contract=off (CMakeLists.txt): `d * q - m` must round twice, as
// gguf.quants and ggml do, for GGUF rows to dequantize bit for bit.
#include "zenith/kernels/quant_formats.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>

#include "zenith/error.h"

namespace zenith::quant {

const float kNF4[16] = {-1.0f,
                        -0.6961928009986877f,
                        -0.5250730514526367f,
                        -0.39491748809814453f,
                        -0.28444138169288635f,
                        -0.18477343022823334f,
                        -0.09105003625154495f,
                        0.0f,
                        0.07958029955625534f,
                        0.16093020141124725f,
                        0.24611230194568634f,
                        0.33791524171829224f,
                        0.44070982933044434f,
                        0.5626170039176941f,
                        0.7229568362236023f,
                        1.0f};

namespace {

bool small_block(QFormat f, SmallBlock* s) {
  *s = small_block_layout(f);
  return s->valid;
}

// Code j of chunk c of a small block at p (before the offset is subtracted).
inline int small_code(const SmallBlock& s, const uint8_t* p, int c, int j) {
  if (s.int8) return int8_t(p[s.qs + 32 * c + j]);
  const uint8_t* qs = p + s.qs + 16 * c;
  int v = j < 16 ? qs[j] & 15 : qs[j - 16] >> 4;
  if (s.qh >= 0) {
    uint32_t qh;
    std::memcpy(&qh, p + s.qh, 4);
    v |= int((qh >> j) & 1) << 4;
  }
  return v;
}

// q6_k: code e (0..255) of the super-block at p, in [0, 63]. Each half of 128 values
// takes 64 bytes of ql and 32 of qh: values l, l + 32, l + 64, l + 96 (l < 32) are the
// low nibbles of ql[l], ql[l + 32], then their high nibbles, with qh[l]'s bit pairs 0-1,
// 2-3, 4-5, 6-7 on top.
inline int q6k_code(const uint8_t* p, int e) {
  int h = e / 128, r = e % 128, quarter = r / 32, l = r % 32;
  const uint8_t* ql = p + offsetof(BlockQ6K, ql) + 64 * h;
  const uint8_t* qh = p + offsetof(BlockQ6K, qh) + 32 * h;
  int lo = quarter & 1 ? ql[l + 32] : ql[l];
  lo = quarter & 2 ? lo >> 4 : lo & 15;
  return lo | (((qh[l] >> (2 * quarter)) & 3) << 4);
}

// q4_k / q5_k: code l of sub-block j of the super-block at p, in [0, 15] / [0, 31].
inline int qk_code(const uint8_t* p, bool five, int j, int l) {
  size_t qs = five ? offsetof(BlockQ5K, qs) : offsetof(BlockQ4K, qs);
  int v = (p[qs + 32 * size_t(j / 2) + size_t(l)] >> (4 * (j & 1))) & 15;
  if (five) v |= ((p[offsetof(BlockQ5K, qh) + size_t(l)] >> j) & 1) << 4;
  return v;
}

void dequant_kquant(QFormat f, const uint8_t* row, int64_t K, float* y) {
  const int64_t bb = qformat_info(f).block_bytes;
  for (int64_t b = 0; b < K / 256; ++b, y += 256) {
    const uint8_t* p = row + b * bb;
    if (f == QFormat::q6_k) {
      const float d = f16_at(p + offsetof(BlockQ6K, d));
      const int8_t* sc = reinterpret_cast<const int8_t*>(p + offsetof(BlockQ6K, scales));
      for (int e = 0; e < 256; ++e) y[e] = (d * float(sc[e / 16])) * float(q6k_code(p, e) - 32);
      continue;
    }
    const float d = f16_at(p), dmin = f16_at(p + 2);
    uint8_t sc[8], mn[8];
    unpack_q4k_scales(p + 4, sc, mn);
    for (int j = 0; j < 8; ++j) {
      const float d1 = d * float(sc[j]), m1 = dmin * float(mn[j]);
      for (int l = 0; l < 32; ++l) y[32 * j + l] = d1 * float(qk_code(p, f == QFormat::q5_k, j, l)) - m1;
    }
  }
}

}  // namespace

void ref_dequant_row(QFormat f, const uint8_t* row, int64_t K, float* y) {
  SmallBlock s;
  if (small_block(f, &s)) {
    const int64_t per = 32 * s.chunks;
    for (int64_t b = 0; b < K / per; ++b) {
      const uint8_t* p = row + b * s.bytes;
      const float d = f16_at(p), m = s.has_m ? f16_at(p + 2) : 0.0f;
      for (int c = 0; c < s.chunks; ++c)
        for (int j = 0; j < 32; ++j) {
          const int q = small_code(s, p, c, j);
          y[b * per + 32 * c + j] = s.has_m ? d * float(q) + m : d * float(q - s.offset);
        }
    }
    return;
  }
  switch (f) {
    case QFormat::q4_k:
    case QFormat::q5_k:
    case QFormat::q6_k: dequant_kquant(f, row, K, y); return;
    case QFormat::int8: {
      const float scale = f32_at(row);
      for (int64_t k = 0; k < K; ++k) y[k] = scale * float(int8_t(row[4 + k]));
      return;
    }
    case QFormat::nf4:
      for (int64_t b = 0; b < K / 64; ++b) {
        const uint8_t* p = row + b * 34;
        const float absmax = f16_at(p);
        for (int c = 0; c < 2; ++c)
          for (int j = 0; j < 32; ++j) {
            const uint8_t byte = p[2 + 16 * c + (j & 15)];
            y[b * 64 + 32 * c + j] = kNF4[j < 16 ? byte & 15 : byte >> 4] * absmax;
          }
      }
      return;
    default: fail("qdequantize: no reference for format ", qformat_info(f).name);
  }
}

ActKind act_kind(QFormat f) {
  switch (f) {
    case QFormat::q4_k:
    case QFormat::q5_k:
    case QFormat::q6_k: return ActKind::kQ8x256;
    case QFormat::nf4: return ActKind::kF32;
    default: return ActKind::kQ8x32;
  }
}

void zero_sums(const int8_t* q, int64_t kpad, int zero, int32_t* out) {
  for (int64_t j = 0; j < kpad / 4; ++j)
    out[j] = -zero * (int32_t(q[4 * j]) + q[4 * j + 1] + q[4 * j + 2] + q[4 * j + 3]);
}

void lane_rows(const QActRow* a, int rows, int width, int64_t kpad, int8_t* q, float* d, int32_t* z) {
  for (int64_t j = 0; j < kpad / 4; ++j)
    for (int r = 0; r < width; ++r)
      for (int i = 0; i < 4; ++i) q[4 * (width * j + r) + i] = r < rows ? a[r].q[4 * j + i] : int8_t(0);
  for (int64_t b = 0; b < kpad / 32; ++b)
    for (int r = 0; r < width; ++r) {
      d[width * b + r] = r < rows ? a[r].d[b] : 0.0f;
      z[width * b + r] = r < rows ? -8 * (int32_t(a[r].s16[2 * b]) + a[r].s16[2 * b + 1]) : 0;
    }
}

void lane_unpack(QFormat f, const uint8_t* w, int64_t row_bytes, int cols, int width, int64_t K, uint8_t* codes,
                 float* scales) {
  const SmallBlock s = small_block_layout(f);
  for (int c = 0; c < width; ++c) {
    if (c >= cols) {
      std::fill_n(codes + c * K, K, uint8_t(0));
      std::fill_n(scales + c * (K / 32), K / 32, 0.0f);
      continue;
    }
    for (int64_t b = 0; b < K / 32; ++b) {
      const uint8_t* p = w + c * row_bytes + (b / s.chunks) * s.bytes;
      scales[c * (K / 32) + b] = f16_at(p);
      for (int j = 0; j < 32; ++j) codes[c * K + 32 * b + j] = uint8_t(small_code(s, p, int(b % s.chunks), j));
    }
  }
}

void quantize_act_row(const float* x, int64_t K, int64_t block, int8_t* q, float* d, int16_t* s16, float scale,
                      int qmax) {
  const int64_t kpad = (K + 31) / 32 * 32;
  const float top = float(qmax);
  for (int64_t b0 = 0; b0 < kpad; b0 += block) {
    const int64_t end = std::min(b0 + block, K), qend = std::min(b0 + block, kpad);
    float amax = 0.0f;
    bool finite = true;
    for (int64_t k = b0; k < end; ++k) {
      const float a = std::fabs(x[k]);
      amax = a > amax ? a : amax;
      finite = finite && a <= FLT_MAX;  // false for inf and NaN
    }
    if (scale > 0.0f) amax = top * scale;  // static: the block's codes on the given scale
    const float id = act_block_multiplier(amax, finite, scale, top, d + b0 / block);
    if (id == 0.0f) {
      std::fill(q + b0, q + qend, int8_t(0));
      continue;
    }
    for (int64_t k = b0; k < qend; ++k) {
      // Round half to even; |x * id| <= qmax up to one rounding, clamped to make
      // [-qmax, qmax] certain (the SIMD kernels' 16-bit pair sums rely on it).
      const float r = k < K ? std::nearbyint(x[k] * id) : 0.0f;
      q[k] = int8_t(std::min(top, std::max(-top, r)));
    }
  }
  for (int64_t g = 0; g < kpad / 16; ++g) {
    int s = 0;
    for (int i = 0; i < 16; ++i) s += q[16 * g + i];
    s16[g] = int16_t(s);
  }
}

float act_row_scale(const float* x, int64_t K, int qmax) {
  float amax = 0.0f;
  for (int64_t k = 0; k < K; ++k) {
    const float a = std::fabs(x[k]);
    amax = a > amax ? a : amax;  // NaN: kept out
  }
  return act_row_scale_of_max(amax, qmax);
}

float ref_dot(QFormat f, const uint8_t* w, int64_t K, const QActRow& a) {
  SmallBlock s;
  if (small_block(f, &s)) {
    // Per 32-value chunk: d_w d_x sum((q - offset) q_x), plus m_w d_x sum(q_x) with a min.
    float y = 0.0f, ym = 0.0f;
    for (int64_t blk = 0; blk < K / (32 * s.chunks); ++blk) {
      const uint8_t* p = w + blk * s.bytes;
      const float d = f16_at(p), m = s.has_m ? f16_at(p + 2) : 0.0f;
      for (int c = 0; c < s.chunks; ++c) {
        const int64_t b = blk * s.chunks + c;
        const int8_t* qx = a.q + 32 * b;
        int32_t dot = 0;
        for (int j = 0; j < 32; ++j) dot += (small_code(s, p, c, j) - s.offset) * qx[j];
        y += (d * a.d[b]) * float(dot);
        if (s.has_m) ym += (m * a.d[b]) * float(a.s16[2 * b] + a.s16[2 * b + 1]);
      }
    }
    return y + ym;
  }
  switch (f) {
    case QFormat::q4_k:
    case QFormat::q5_k:
    case QFormat::q6_k: {
      // Per super-block: one integer sum of (sub-block scale x code dot), one float multiply.
      const int64_t bb = qformat_info(f).block_bytes;
      float y = 0.0f;
      for (int64_t b = 0; b < K / 256; ++b) {
        const uint8_t* p = w + b * bb;
        const int8_t* qx = a.q + 256 * b;
        const int16_t* s16 = a.s16 + 16 * b;
        if (f == QFormat::q6_k) {
          const int8_t* sc = reinterpret_cast<const int8_t*>(p + offsetof(BlockQ6K, scales));
          int32_t isum = 0;
          for (int g = 0; g < 16; ++g) {
            int32_t dot = 0;
            for (int i = 0; i < 16; ++i) dot += q6k_code(p, 16 * g + i) * qx[16 * g + i];
            isum += sc[g] * (dot - 32 * s16[g]);
          }
          y += (f16_at(p + offsetof(BlockQ6K, d)) * a.d[b]) * float(isum);
          continue;
        }
        uint8_t sc[8], mn[8];
        unpack_q4k_scales(p + 4, sc, mn);
        int32_t isum = 0, msum = 0;
        for (int j = 0; j < 8; ++j) {
          int32_t dot = 0;
          for (int l = 0; l < 32; ++l) dot += qk_code(p, f == QFormat::q5_k, j, l) * qx[32 * j + l];
          isum += sc[j] * dot;
          msum += mn[j] * (s16[2 * j] + s16[2 * j + 1]);
        }
        y += (f16_at(p) * a.d[b]) * float(isum) - (f16_at(p + 2) * a.d[b]) * float(msum);
      }
      return y;
    }
    case QFormat::int8: {
      // Per 32 values (the last block may be short): d_x sum(q q_x); the row scale last.
      // The codes read as int8_t: GCC 12 with AVX-VNNI on (-march=native) vectorized the
      // loop over int8_t(u8) x int8 into vpdpbusd with wrong sums.
      const int8_t* codes = reinterpret_cast<const int8_t*>(w + 4);
      float y = 0.0f;
      for (int64_t b = 0; b * 32 < K; ++b) {
        int32_t dot = 0;
        for (int64_t k = 32 * b; k < std::min(K, 32 * b + 32); ++k) dot += codes[k] * a.q[k];
        y += a.d[b] * float(dot);
      }
      return f32_at(w) * y;
    }
    case QFormat::nf4: {
      float y = 0.0f;
      for (int64_t b = 0; b < K / 64; ++b) {
        const uint8_t* p = w + b * 34;
        const float absmax = f16_at(p);
        for (int c = 0; c < 2; ++c)
          for (int j = 0; j < 32; ++j) {
            const uint8_t byte = p[2 + 16 * c + (j & 15)];
            y += (kNF4[j < 16 ? byte & 15 : byte >> 4] * absmax) * a.x[64 * b + 32 * c + j];
          }
      }
      return y;
    }
    default: fail("qmatmul: no reference for format ", qformat_info(f).name);
  }
}

}  // namespace zenith::quant
