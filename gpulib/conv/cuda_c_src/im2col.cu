// 16.4 in CUDA C: im2col, one thread per element of X_col [C*R*S, N*H'*W'] (the book's
// im2col_kernel in gpulib/conv/im2col.py). Row (c, r, s) is blockIdx.y; column (n, y, x)
// runs along blockIdx.x * blockDim.x + threadIdx.x, so neighbouring threads write
// neighbouring addresses and, at stride 1, read neighbouring pixels.
//
// Two builds of one body: im2col_runtime takes the sizes as arguments, so each / and % is a
// real integer division (dozens of instructions); im2col_fixed<...> has them as template
// constants, and the compiler turns every division into a multiply and a shift.

template <typename Size>
__device__ __forceinline__ void im2col_body(const float* X, float* X_col, Size C, Size H, Size Wd, Size R, Size S,
                                            Size Ho, Size Wo, Size pad, Size stride, long long columns)
{
    long long col = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y;
    if (col >= columns) return;
    int x = col % Wo;
    int y = (col / Wo) % Ho;
    int n = col / (Wo * Ho);
    int s = row % S;
    int r = (row / S) % R;
    int c = row / (R * S);
    int iy = y * stride + r - pad;
    int ix = x * stride + s - pad;
    bool inside = iy >= 0 && iy < H && ix >= 0 && ix < Wd;
    X_col[row * columns + col] = inside ? X[((long long)(n * C + c) * H + iy) * Wd + ix] : 0.0f;
}

extern "C" __global__ void im2col_runtime(const float* X, float* X_col, int C, int H, int Wd, int R, int S,
                                          int Ho, int Wo, int pad, int stride, long long columns)
{
    im2col_body<int>(X, X_col, C, H, Wd, R, S, Ho, Wo, pad, stride, columns);
}

template <int C, int H, int Wd, int R, int S, int Ho, int Wo, int PAD, int STRIDE>
__global__ void im2col_fixed(const float* X, float* X_col, long long columns)
{
    im2col_body<int>(X, X_col, C, H, Wd, R, S, Ho, Wo, PAD, STRIDE, columns);
}
