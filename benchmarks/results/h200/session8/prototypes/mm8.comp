#version 450
// Prototype only: 128x128 workgroup tile, 256 threads, 8x8 per thread (4+4 rows, 4+4 columns), K step 32,
// A k-major in shared memory, next step's global loads prefetched in registers.
layout(local_size_x = 16, local_size_y = 16) in;
layout(std430, set = 0, binding = 0) restrict writeonly buffer C_ { vec4 C[]; };
layout(std430, set = 0, binding = 1) restrict readonly buffer A_ { vec4 A[]; };
layout(std430, set = 0, binding = 2) restrict readonly buffer B_ { vec4 B[]; };
const int N = 4096, N4 = N / 4, TM = 128, TN = 128, KT = KSTEP, S = TM + 4;
shared vec4 As[KT * S / 4];
shared vec4 Bs[KT * TN / 4];
void main() {
    int tx = int(gl_LocalInvocationID.x), ty = int(gl_LocalInvocationID.y), t = ty * 16 + tx;
    int m0 = int(gl_WorkGroupID.y) * TM, n0 = int(gl_WorkGroupID.x) * TN;
    vec4 acc[16];  // acc[r * 2 + h]: row (r < 4 ? ty*4+r : 64+ty*4+r-4), columns h*64 + tx*4
    for (int i = 0; i < 16; i++) acc[i] = vec4(0.0);
    const int NA = TM * KT / 4 / 256, NB = KT * TN / 4 / 256;
    vec4 pa[NA], pb[NB];
    #define AG(i) ((i) * 256 + t)
    #define AROW(i) (AG(i) / 2 % 128)
    #define AKQ(i) ((AG(i) / 256) * 2 + AG(i) % 2)
    #define BROW(i) ((i) * 8 + t / 32)
    #define BCQ(i) (t % 32)
    for (int i = 0; i < NA; i++) pa[i] = A[(m0 + AROW(i)) * N4 + AKQ(i)];
    for (int i = 0; i < NB; i++) pb[i] = B[BROW(i) * N4 + n0 / 4 + BCQ(i)];
    for (int k0 = 0; k0 < N; k0 += KT) {
        for (int i = 0; i < NA; i++) {
            int r = AROW(i), k = AKQ(i) * 4;
            As[((k + 0) * S + r) / 4][r % 4] = pa[i].x; As[((k + 1) * S + r) / 4][r % 4] = pa[i].y;
            As[((k + 2) * S + r) / 4][r % 4] = pa[i].z; As[((k + 3) * S + r) / 4][r % 4] = pa[i].w;
        }
        for (int i = 0; i < NB; i++) Bs[BROW(i) * 32 + BCQ(i)] = pb[i];
        barrier();
        int kn = min(k0 + KT, N - KT);
        for (int i = 0; i < NA; i++) pa[i] = A[(m0 + AROW(i)) * N4 + kn / 4 + AKQ(i)];
        for (int i = 0; i < NB; i++) pb[i] = B[(kn + BROW(i)) * N4 + n0 / 4 + BCQ(i)];
        for (int k = 0; k < KT; k++) {
            vec4 b0 = Bs[k * 32 + tx], b1 = Bs[k * 32 + 16 + tx];
            vec4 a0 = As[(k * S + ty * 4) / 4], a1 = As[(k * S + 64 + ty * 4) / 4];
            for (int r = 0; r < 4; r++) {
                acc[r * 2] += a0[r] * b0; acc[r * 2 + 1] += a0[r] * b1;
                acc[8 + r * 2] += a1[r] * b0; acc[8 + r * 2 + 1] += a1[r] * b1;
            }
        }
        barrier();
    }
    for (int r = 0; r < 8; r++) {
        int row = m0 + (r < 4 ? ty * 4 + r : 64 + ty * 4 + r - 4);
        C[row * N4 + n0 / 4 + tx] = acc[r * 2];
        C[row * N4 + n0 / 4 + 16 + tx] = acc[r * 2 + 1];
    }
}
