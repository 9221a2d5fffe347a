// 3x3 convolution (stride 1, padding 1) by Winograd's F(2x2, 3x3): each 2x2 block of
// outputs comes from a 4x4 input patch with 16 multiplies per (input, output) channel
// pair instead of 36, so the GEMM work drops 2.25x. Per call: the filters transformed
// (U = G g G^T, 16 matrices OC x IC), the input's patches transformed (V = B^T d B, 16
// matrices IC x tiles), 16 GEMMs M = U V (sgemm; U read in place), and the outputs
// transformed back (A^T m A) with the conv's epilogue (bias / folded batch-norm,
// residual, activation) applied as they are written. Rounding differs from the direct
// conv by a few ulp of the larger intermediate sums (tested against a scalar direct
// convolution and against eager).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "zenith/error.h"
#include "zenith/kernels/activation.h"
#include "zenith/kernels/gemm_internal.h"
#include "zenith/kernels/kernels.h"
#include "zenith/threadpool.h"

namespace zenith {

namespace {
// U[xi][oc][ic] = (G g G^T)[xi], G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1].
void transform_filters(int64_t OC, int64_t C, const float* w, float* U) {
  parallel_for(OC, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t oc = lo; oc < hi; ++oc)
      for (int64_t ic = 0; ic < C; ++ic) {
        const float* g = w + (oc * C + ic) * 9;
        float t[4][3];  // G g
        for (int c = 0; c < 3; ++c) {
          t[0][c] = g[c];
          t[1][c] = 0.5f * (g[c] + g[3 + c] + g[6 + c]);
          t[2][c] = 0.5f * (g[c] - g[3 + c] + g[6 + c]);
          t[3][c] = g[6 + c];
        }
        for (int r = 0; r < 4; ++r) {  // (G g) G^T
          float u[4] = {t[r][0], 0.5f * (t[r][0] + t[r][1] + t[r][2]), 0.5f * (t[r][0] - t[r][1] + t[r][2]), t[r][2]};
          for (int c = 0; c < 4; ++c) U[((r * 4 + c) * OC + oc) * C + ic] = u[c];
        }
      }
  });
}
}  // namespace

bool conv2d_uses_winograd(int64_t groups, int64_t KH, int64_t KW, const std::vector<int64_t>& stride,
                          const std::vector<int64_t>& padding, const std::vector<int64_t>& dilation, int64_t C,
                          int64_t H, int64_t W, int64_t OC) {
  static const bool off = std::getenv("ZENITH_NO_WINOGRAD") != nullptr;
  return !off && groups == 1 && KH == 3 && KW == 3 && stride == std::vector<int64_t>{1, 1} &&
         padding == std::vector<int64_t>{1, 1} && dilation == std::vector<int64_t>{1, 1} && H * W >= 144 &&
         C >= 128 && OC >= 128;
}

PackedOperand conv3x3_winograd_pack(int64_t OC, int64_t C, const float* w) {
  PackedOperand p;
  p.side = PackedOperand::kWinograd;
  p.src = w;
  p.rows = OC;
  p.cols = C * 9;
  p.rs = C * 9;
  p.cs = 1;
  p.data = std::shared_ptr<float>(static_cast<float*>(std::aligned_alloc(64, size_t(16 * OC * C) * sizeof(float))),
                                  std::free);
  ZENITH_CHECK(p.data, "conv2d: out of memory for Winograd filters");
  transform_filters(OC, C, w, p.data.get());
  return p;
}

void conv3x3_winograd(const float* x, int64_t C, int64_t H, int64_t W, const float* w, int64_t OC, float* out,
                      const GemmEpilogue& ep, const PackedOperand* filters) {
  using gemm_detail::AlignedBuf;
  const int64_t th = (H + 1) / 2, tw = (W + 1) / 2, T = th * tw;
  thread_local AlignedBuf ubuf, vbuf, mbuf;
  const float* U;
  if (filters) {
    ZENITH_CHECK(filters->side == PackedOperand::kWinograd && filters->src == w && filters->rows == OC &&
                     filters->cols == C * 9,
                 "conv2d: the Winograd filters were made for another weight");
    U = filters->data.get();
  } else {
    float* u = ubuf.get(size_t(16 * OC * C));
    transform_filters(OC, C, w, u);
    U = u;
  }
  float* V = vbuf.get(size_t(16 * C * T));
  float* M = mbuf.get(size_t(16 * OC * T));

  // V[xi][ic][tile] = (B^T d B)[xi], d the 4x4 patch at (2i - 1, 2j - 1), zero outside;
  // B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1].
  parallel_for(C, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t ic = lo; ic < hi; ++ic) {
      const float* plane = x + ic * H * W;
      for (int64_t i = 0; i < th; ++i)
        for (int64_t j = 0; j < tw; ++j) {
          float d[4][4];
          for (int r = 0; r < 4; ++r) {
            int64_t y = 2 * i - 1 + r;
            for (int c = 0; c < 4; ++c) {
              int64_t xx = 2 * j - 1 + c;
              d[r][c] = (y >= 0 && y < H && xx >= 0 && xx < W) ? plane[y * W + xx] : 0.0f;
            }
          }
          float t[4][4];  // B^T d
          for (int c = 0; c < 4; ++c) {
            t[0][c] = d[0][c] - d[2][c];
            t[1][c] = d[1][c] + d[2][c];
            t[2][c] = d[2][c] - d[1][c];
            t[3][c] = d[1][c] - d[3][c];
          }
          int64_t tile = i * tw + j;
          for (int r = 0; r < 4; ++r) {  // (B^T d) B
            float v[4] = {t[r][0] - t[r][2], t[r][1] + t[r][2], t[r][2] - t[r][1], t[r][1] - t[r][3]};
            for (int c = 0; c < 4; ++c) V[((r * 4 + c) * C + ic) * T + tile] = v[c];
          }
        }
    }
  });

  for (int64_t xi = 0; xi < 16; ++xi)
    sgemm(OC, T, C, 1.0f, U + xi * OC * C, C, 1, V + xi * C * T, T, 1, M + xi * OC * T, T, false);

  // out = A^T m A, A^T = [1 1 1 0; 0 1 -1 -1], then the epilogue per output value.
  const int64_t HW = H * W;
  with_activation(ep.act, [&](auto act) {
    parallel_for(OC, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t oc = lo; oc < hi; ++oc) {
        float s = ep.row_scale ? ep.row_scale[oc] : 1.0f, sh = ep.row_shift ? ep.row_shift[oc] : 0.0f;
        const float* res = ep.residual ? ep.residual + oc * ep.ld_residual : nullptr;
        float* o = out + oc * HW;
        for (int64_t i = 0; i < th; ++i)
          for (int64_t j = 0; j < tw; ++j) {
            int64_t tile = i * tw + j;
            float m[4][4];
            for (int k = 0; k < 16; ++k) m[k / 4][k % 4] = M[(k * OC + oc) * T + tile];
            float t[2][4];  // A^T m
            for (int c = 0; c < 4; ++c) {
              t[0][c] = m[0][c] + m[1][c] + m[2][c];
              t[1][c] = m[1][c] - m[2][c] - m[3][c];
            }
            for (int r = 0; r < 2; ++r) {
              int64_t y = 2 * i + r;
              if (y >= H) break;
              float yv[2] = {t[r][0] + t[r][1] + t[r][2], t[r][1] - t[r][2] - t[r][3]};  // (A^T m) A
              for (int c = 0; c < 2; ++c) {
                int64_t xx = 2 * j + c;
                if (xx >= W) break;
                float v = yv[c] * s + sh + (res ? res[y * W + xx] : 0.0f);
                o[y * W + xx] = act(v);
              }
            }
          }
      }
    });
  });
  ubuf.trim(size_t(16) << 20);
  vbuf.trim(size_t(16) << 20);
  mbuf.trim(size_t(16) << 20);
}

}  // namespace zenith
