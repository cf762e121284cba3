#version 450
// Prototype only (not shipped): f32 matmul C = A*B, 4096^3, workgroup tile 128x64, K step 32, 16x4 per thread.
// TRANSPOSED_A: A tile kept k-major in shared memory (As[k][m]) so a thread's 16 rows at one k are 4 vec4 loads.
layout(local_size_x = 16, local_size_y = 8) in;
layout(std430, set = 0, binding = 0) restrict writeonly buffer C_ { vec4 C[]; };
layout(std430, set = 0, binding = 1) restrict readonly buffer A_ { vec4 A[]; };
layout(std430, set = 0, binding = 2) restrict readonly buffer B_ { vec4 B[]; };
const int N = 4096, N4 = N / 4, TM = 128, TN = 64, KT = 32;
#ifdef TRANSPOSED_A
const int S = TM + 4;
shared vec4 As[KT * S / 4];
#else
shared vec4 As[TM * KT / 4];
#endif
shared vec4 Bs[KT * TN / 4];
void main() {
    int tx = int(gl_LocalInvocationID.x), ty = int(gl_LocalInvocationID.y), t = ty * 16 + tx;
    int m0 = int(gl_WorkGroupID.y) * TM, n0 = int(gl_WorkGroupID.x) * TN;
    vec4 acc[16];
    for (int i = 0; i < 16; i++) acc[i] = vec4(0.0);
    vec4 pa[8], pb[4];
    // A: 128 rows x 8 vec4; B: 32 rows x 16 vec4.
#ifdef TRANSPOSED_A
    #define AROW(i) (((i) * 128 + t) / 2 % 128)
    #define AKQ(i) ((((i) * 128 + t) / 256) * 2 + (((i) * 128 + t) % 2))
#else
    #define AROW(i) ((i) * 16 + t / 8)
    #define AKQ(i) (t % 8)
#endif
    #define BROW(i) ((i) * 8 + t / 16)
    #define BCQ(i) (t % 16)
    for (int i = 0; i < 8; i++) pa[i] = A[(m0 + AROW(i)) * N4 + AKQ(i)];
    for (int i = 0; i < 4; i++) pb[i] = B[BROW(i) * N4 + n0 / 4 + BCQ(i)];
    for (int k0 = 0; k0 < N; k0 += KT) {
        for (int i = 0; i < 8; i++) {
#ifdef TRANSPOSED_A
            int r = AROW(i), k = AKQ(i) * 4;
            As[((k + 0) * S + r) / 4][r % 4] = pa[i].x; As[((k + 1) * S + r) / 4][r % 4] = pa[i].y;
            As[((k + 2) * S + r) / 4][r % 4] = pa[i].z; As[((k + 3) * S + r) / 4][r % 4] = pa[i].w;
#else
            As[AROW(i) * 8 + AKQ(i)] = pa[i];
#endif
        }
        for (int i = 0; i < 4; i++) Bs[BROW(i) * 16 + BCQ(i)] = pb[i];
        barrier();
        int kn = min(k0 + KT, N - KT);
        for (int i = 0; i < 8; i++) pa[i] = A[(m0 + AROW(i)) * N4 + kn / 4 + AKQ(i)];
        for (int i = 0; i < 4; i++) pb[i] = B[(kn + BROW(i)) * N4 + n0 / 4 + BCQ(i)];
#ifdef TRANSPOSED_A
        for (int k = 0; k < KT; k++) {
            vec4 b = Bs[k * 16 + tx];
            for (int q = 0; q < 4; q++) {
                vec4 a = As[(k * S + ty * 16 + q * 4) / 4];
                acc[q * 4 + 0] += a.x * b; acc[q * 4 + 1] += a.y * b;
                acc[q * 4 + 2] += a.z * b; acc[q * 4 + 3] += a.w * b;
            }
        }
#else
        for (int kk = 0; kk < KT; kk += 4) {
            vec4 b0 = Bs[kk * 16 + tx], b1 = Bs[(kk + 1) * 16 + tx], b2 = Bs[(kk + 2) * 16 + tx], b3 = Bs[(kk + 3) * 16 + tx];
            for (int i = 0; i < 16; i++) {
                vec4 a = As[(ty * 16 + i) * 8 + kk / 4];
                acc[i] = fma(b3, vec4(a.w), fma(b2, vec4(a.z), fma(b1, vec4(a.y), fma(b0, vec4(a.x), acc[i]))));
            }
        }
#endif
        barrier();
    }
    for (int i = 0; i < 16; i++) C[(m0 + ty * 16 + i) * N4 + n0 / 4 + tx] = acc[i];
}
