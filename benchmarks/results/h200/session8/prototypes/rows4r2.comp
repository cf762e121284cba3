#version 450
// Prototype only (not shipped): two rows per 256-thread workgroup, vec4 accesses, 4 vec4 per thread per row;
// layernorm's gamma/beta read once for both rows.
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_KHR_shader_subgroup_basic : require
layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) restrict readonly buffer X_ { vec4 X[]; };
layout(std430, set = 0, binding = 1) restrict writeonly buffer Y_ { vec4 Y[]; };
#ifdef LAYERNORM
layout(std430, set = 0, binding = 2) restrict readonly buffer G_ { vec4 G[]; };
layout(std430, set = 0, binding = 3) restrict readonly buffer Bt_ { vec4 Bt[]; };
#endif
shared vec2 red0[8];
shared vec2 red1[8];
vec2 xsum(vec2 v) { for (int m = 16; m > 0; m /= 2) v += subgroupShuffleXor(v, m); return v; }
vec2 xmax(vec2 v) { for (int m = 16; m > 0; m /= 2) v = max(v, subgroupShuffleXor(v, m)); return v; }
void main() {
    int t = int(gl_LocalInvocationID.x);
    int wg = int(gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x);
    int b0 = (2 * wg) * 1024, b1 = b0 + 1024;
    vec4 u[4], v[4];
    for (int i = 0; i < 4; i++) { u[i] = X[b0 + t + 256 * i]; v[i] = X[b1 + t + 256 * i]; }
    int lane = t % 32, w = t / 32;
#ifdef LAYERNORM
    vec4 su = u[0] + u[1] + u[2] + u[3], sv = v[0] + v[1] + v[2] + v[3];
    vec2 s = xsum(vec2(su.x + su.y + su.z + su.w, sv.x + sv.y + sv.z + sv.w));
    if (lane == 0) red0[w] = s;
    barrier();
    s = vec2(0.0);
    for (int i = 0; i < 8; i++) s += red0[i];
    vec2 mean = s * (1.0 / 4096.0);
    vec4 qu = vec4(0.0), qv = vec4(0.0);
    for (int i = 0; i < 4; i++) { u[i] -= mean.x; v[i] -= mean.y; qu += u[i] * u[i]; qv += v[i] * v[i]; }
    vec2 q = xsum(vec2(qu.x + qu.y + qu.z + qu.w, qv.x + qv.y + qv.z + qv.w));
    if (lane == 0) red1[w] = q;
    barrier();
    q = vec2(0.0);
    for (int i = 0; i < 8; i++) q += red1[i];
    vec2 rstd = inversesqrt(q * (1.0 / 4096.0) + 1e-5);
    for (int i = 0; i < 4; i++) {
        vec4 g = G[t + 256 * i], bb = Bt[t + 256 * i];
        Y[b0 + t + 256 * i] = u[i] * rstd.x * g + bb;
        Y[b1 + t + 256 * i] = v[i] * rstd.y * g + bb;
    }
#else
    vec4 mu = max(max(u[0], u[1]), max(u[2], u[3])), mv = max(max(v[0], v[1]), max(v[2], v[3]));
    vec2 m = xmax(vec2(max(max(mu.x, mu.y), max(mu.z, mu.w)), max(max(mv.x, mv.y), max(mv.z, mv.w))) * 0.125);
    if (lane == 0) red0[w] = m;
    barrier();
    m = red0[0];
    for (int i = 1; i < 8; i++) m = max(m, red0[i]);
    vec4 su = vec4(0.0), sv = vec4(0.0);
    for (int i = 0; i < 4; i++) {
        u[i] = exp(u[i] * 0.125 - m.x); v[i] = exp(v[i] * 0.125 - m.y); su += u[i]; sv += v[i];
    }
    vec2 s = xsum(vec2(su.x + su.y + su.z + su.w, sv.x + sv.y + sv.z + sv.w));
    if (lane == 0) red1[w] = s;
    barrier();
    s = vec2(0.0);
    for (int i = 0; i < 8; i++) s += red1[i];
    vec2 r = 1.0 / s;
    for (int i = 0; i < 4; i++) { Y[b0 + t + 256 * i] = u[i] * r.x; Y[b1 + t + 256 * i] = v[i] * r.y; }
#endif
}
