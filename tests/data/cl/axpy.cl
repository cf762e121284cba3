// c[i] = a[i] + b[i] * s for i < n; the test kernel of tests/test_runtime_cl.py.
// Arguments follow portable's OpenCL convention: the buffers in order, then one int per push constant.
__kernel __attribute__((reqd_work_group_size(64, 1, 1)))
void axpy(__global const float* a, __global const float* b, __global float* c, int n, int s) {
    int i = get_global_id(0);
    if (i < n) {  // the grid is rounded up to whole workgroups
        c[i] = a[i] + b[i] * (float)s;
    }
}
