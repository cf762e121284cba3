#version 450
// Prototype only (not shipped): row kernels over 4096x4096 f32, one 256-thread workgroup per row.
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_KHR_shader_subgroup_basic : require
layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) restrict readonly buffer X_ { float X[]; };
layout(std430, set = 0, binding = 1) restrict writeonly buffer Y_ { float Y[]; };
#ifdef LAYERNORM
layout(std430, set = 0, binding = 2) restrict readonly buffer G_ { float G[]; };
layout(std430, set = 0, binding = 3) restrict readonly buffer Bt_ { float Bt[]; };
#endif
const int N = 4096;
shared float red0[8];
shared float red1[8];
float xsum(float v) { for (int m = 16; m > 0; m /= 2) v += subgroupShuffleXor(v, m); return v; }
float xmax(float v) { for (int m = 16; m > 0; m /= 2) v = max(v, subgroupShuffleXor(v, m)); return v; }
void main() {
    int t = int(gl_LocalInvocationID.x);
    int row = int(gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x);
    int base = row * N;
    float v[16];
    for (int i = 0; i < 16; i++) v[i] = X[base + t + 256 * i];
    int lane = t % 32, w = t / 32;
#if defined(COPY)
    for (int i = 0; i < 16; i++) Y[base + t + 256 * i] = v[i] * 0.125;
#elif defined(LAYERNORM)
  #ifdef GB_FIRST
    float g[16], b[16];
    for (int i = 0; i < 16; i++) { g[i] = G[t + 256 * i]; b[i] = Bt[t + 256 * i]; }
  #endif
  #ifdef ONE_PASS
    float s = 0.0, q = 0.0;
    for (int i = 0; i < 16; i++) { s += v[i]; q += v[i] * v[i]; }
    s = xsum(s); q = xsum(q);
    if (lane == 0) { red0[w] = s; red1[w] = q; }
    barrier();
    s = 0.0; q = 0.0;
    for (int i = 0; i < 8; i++) { s += red0[i]; q += red1[i]; }
    float mean = s * (1.0 / N);
    float rstd = inversesqrt(max(q * (1.0 / N) - mean * mean, 0.0) + 1e-5);
  #else
    float s = 0.0;
    for (int i = 0; i < 16; i++) s += v[i];
    s = xsum(s);
    if (lane == 0) red0[w] = s;
    barrier();
    s = 0.0;
    for (int i = 0; i < 8; i++) s += red0[i];
    float mean = s * (1.0 / N);
    for (int i = 0; i < 16; i++) v[i] -= mean;
    float q = 0.0;
    for (int i = 0; i < 16; i++) q += v[i] * v[i];
    q = xsum(q);
    if (lane == 0) red1[w] = q;
    barrier();
    q = 0.0;
    for (int i = 0; i < 8; i++) q += red1[i];
    float rstd = inversesqrt(q * (1.0 / N) + 1e-5);
    mean = 0.0;
  #endif
    for (int i = 0; i < 16; i++) {
  #ifndef GB_FIRST
        float gi = G[t + 256 * i], bi = Bt[t + 256 * i];
  #else
        float gi = g[i], bi = b[i];
  #endif
        Y[base + t + 256 * i] = (v[i] - mean) * rstd * gi + bi;
    }
#else  // softmax of 0.125 * x
  #ifdef ONE_PASS
    float m = v[0];
    for (int i = 1; i < 16; i++) m = max(m, v[i]);
    float s = 0.0;
    for (int i = 0; i < 16; i++) { v[i] = exp((v[i] - m) * 0.125); s += v[i]; }
    float M = xmax(m);
    s = xsum(s * exp((m - M) * 0.125));
    if (lane == 0) { red0[w] = M; red1[w] = s; }
    barrier();
    float MM = red0[0];
    for (int i = 1; i < 8; i++) MM = max(MM, red0[i]);
    float S = 0.0;
    for (int i = 0; i < 8; i++) S += red1[i] * exp((red0[i] - MM) * 0.125);
    float f = exp((m - MM) * 0.125) / S;
    for (int i = 0; i < 16; i++) Y[base + t + 256 * i] = v[i] * f;
  #else
    float m = v[0] * 0.125;
    for (int i = 1; i < 16; i++) m = max(m, v[i] * 0.125);
    m = xmax(m);
    if (lane == 0) red0[w] = m;
    barrier();
    m = red0[0];
    for (int i = 1; i < 8; i++) m = max(m, red0[i]);
    float s = 0.0;
    for (int i = 0; i < 16; i++) { v[i] = exp(v[i] * 0.125 - m); s += v[i]; }
    s = xsum(s);
    if (lane == 0) red1[w] = s;
    barrier();
    s = 0.0;
    for (int i = 0; i < 8; i++) s += red1[i];
    for (int i = 0; i < 16; i++) Y[base + t + 256 * i] = v[i] / s;
  #endif
#endif
}
