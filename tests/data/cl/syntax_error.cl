// Deliberately broken: a missing ')' so the driver refuses it and reports a build log.
__kernel void axpy(__global const float* a, __global const float* b, __global float* c, int n, int s {
    int i = get_global_id(0);
    if (i < n) c[i] = a[i] + b[i] * (float)s;
}
