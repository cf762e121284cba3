#version 450
// Prototype only (not shipped): persistent row kernels over 4096x4096 f32: the grid holds G workgroups and
// each loops over rows row = wg, wg + G, ...; 256 threads, 4 vec4 per thread. PREFETCH loads the next row
// before reducing the current one; layernorm keeps gamma/beta in registers across rows.
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_KHR_shader_subgroup_basic : require
#define THREADS 256
layout(local_size_x = THREADS) in;
const int V = 1024 / THREADS, W = THREADS / 32, ROWS = 4096, N4 = 1024;
layout(std430, set = 0, binding = 0) restrict readonly buffer X_ { vec4 X[]; };
layout(std430, set = 0, binding = 1) restrict writeonly buffer Y_ { vec4 Y[]; };
#ifdef LAYERNORM
layout(std430, set = 0, binding = 2) restrict readonly buffer G_ { vec4 G[]; };
layout(std430, set = 0, binding = 3) restrict readonly buffer Bt_ { vec4 Bt[]; };
#endif
shared float red0[2][W];
float xsum(float v) { for (int m = 16; m > 0; m /= 2) v += subgroupShuffleXor(v, m); return v; }
float xmax(float v) { for (int m = 16; m > 0; m /= 2) v = max(v, subgroupShuffleXor(v, m)); return v; }
void main() {
    int t = int(gl_LocalInvocationID.x);
    int lane = t % 32, w = t / 32;
    int step = int(gl_NumWorkGroups.x);
    int row = int(gl_WorkGroupID.x);
#ifdef LAYERNORM
    vec4 g[V], b[V];
    for (int i = 0; i < V; i++) { g[i] = G[t + THREADS * i]; b[i] = Bt[t + THREADS * i]; }
#endif
    vec4 v[V], nx[V];
    if (row < ROWS) for (int i = 0; i < V; i++) nx[i] = X[row * N4 + t + THREADS * i];
    int par = 0;
    for (; row < ROWS; row += step) {
        int base = row * N4;
        for (int i = 0; i < V; i++) v[i] = nx[i];
#ifdef PREFETCH
        int nrow = row + step;
        if (nrow < ROWS) for (int i = 0; i < V; i++) nx[i] = X[nrow * N4 + t + THREADS * i];
#else
        int nrow = row + step;
#endif
#if defined(COPY)
        for (int i = 0; i < V; i++) Y[base + t + THREADS * i] = v[i] * 0.125;
#elif defined(LAYERNORM)
        vec4 s4 = v[0];
        for (int i = 1; i < V; i++) s4 += v[i];
        float s = xsum(s4.x + s4.y + s4.z + s4.w);
        if (lane == 0) red0[0][w] = s;
        barrier();
        s = 0.0;
        for (int i = 0; i < W; i++) s += red0[0][i];
        float mean = s * (1.0 / 4096.0);
        vec4 q4 = vec4(0.0);
        for (int i = 0; i < V; i++) { v[i] -= mean; q4 += v[i] * v[i]; }
        float q = xsum(q4.x + q4.y + q4.z + q4.w);
        if (lane == 0) red0[1][w] = q;
        barrier();
        q = 0.0;
        for (int i = 0; i < W; i++) q += red0[1][i];
        float var = q * (1.0 / 4096.0);
        float rstd = inversesqrt(var + 1e-5);
        for (int i = 0; i < V; i++) Y[base + t + THREADS * i] = v[i] * rstd * g[i] + b[i];
#else
        vec4 m4 = v[0];
        for (int i = 1; i < V; i++) m4 = max(m4, v[i]);
        float m = xmax(max(max(m4.x, m4.y), max(m4.z, m4.w)) * 0.125);
        vec4 s4 = vec4(0.0);
        if (lane == 0) red0[0][w] = m;
        barrier();
        m = red0[0][0];
        for (int i = 1; i < W; i++) m = max(m, red0[0][i]);
        for (int i = 0; i < V; i++) { v[i] = exp(v[i] * 0.125 - m); s4 += v[i]; }
        float s = xsum(s4.x + s4.y + s4.z + s4.w);
        if (lane == 0) red0[1][w] = s;
        barrier();
        s = 0.0;
        for (int i = 0; i < W; i++) s += red0[1][i];
        float r = 1.0 / s;
        for (int i = 0; i < V; i++) Y[base + t + THREADS * i] = v[i] * r;
#endif
#ifndef PREFETCH
        if (nrow < ROWS) for (int i = 0; i < V; i++) nx[i] = X[nrow * N4 + t + THREADS * i];
#endif
    }
}
