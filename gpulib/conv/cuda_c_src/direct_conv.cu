// 16.3 in CUDA C: the direct convolution, one thread per output element (the book's
// conv2d_v1_kernel in gpulib/conv/direct.py, line for line). NCHW float32 arrays, contiguous.
//
//   grid  = (ceil(W'/16), ceil(H'/16), min(N*K, 65535)), block = (16, 16); a grid has at most
//   65535 blocks along z, so each block loops over the (image, channel) planes z, z + gridDim.z, ...
//   Y[n, k, y, x] = b[k] + sum over c, r, s of W[k, c, r, s] * X[n, c, y*stride + r - pad, x*stride + s - pad]

extern "C" __global__ void conv2d_direct(const float* X, const float* Wt, const float* b, float* Y,
                                         int N, int C, int H, int Wd, int K, int R, int S,
                                         int Ho, int Wo, int pad, int stride)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= Wo || y >= Ho) return;
    for (int plane = blockIdx.z; plane < N * K; plane += gridDim.z) {
        int n = plane / K;
        int k = plane % K;
        float acc = b[k];
        for (int c = 0; c < C; ++c) {
            for (int r = 0; r < R; ++r) {
                int iy = y * stride + r - pad;
                if (iy < 0 || iy >= H) continue;        // the zero padding adds nothing
                for (int s = 0; s < S; ++s) {
                    int ix = x * stride + s - pad;
                    if (ix < 0 || ix >= Wd) continue;
                    acc += Wt[((k * C + c) * R + r) * S + s] * X[((long long)(n * C + c) * H + iy) * Wd + ix];
                }
            }
        }
        Y[((long long)(n * K + k) * Ho + y) * Wo + x] = acc;
    }
}
