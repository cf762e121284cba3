/* The add_64Mi workload (4 Mi float32: c = a + b) by hand with OpenMP on this host, as the ceiling a kernel can
   reach: mode 0 AVX2 loads and streaming (non-temporal) stores, mode 1 plain stores; best of 50.
   gcc -O3 -mavx2 -fopenmp add_ceiling.c -o add_ceiling && OMP_NUM_THREADS=2 ./add_ceiling */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <omp.h>
#define N (4<<20)
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(){
  float *a=aligned_alloc(64,N*4),*b=aligned_alloc(64,N*4),*c=aligned_alloc(64,N*4);
  for(int i=0;i<N;i++){a[i]=i;b[i]=2*i;c[i]=0;}
  for(int mode=0;mode<2;mode++){
    double best=1e9; double ts[50];
    for(int r=0;r<50;r++){
      double t=now();
      if(mode==0){
        #pragma omp parallel for
        for(int i=0;i<N;i+=8){ __m256 x=_mm256_add_ps(_mm256_load_ps(a+i),_mm256_load_ps(b+i)); _mm256_stream_ps(c+i,x);}
      } else {
        #pragma omp parallel for
        for(int i=0;i<N;i+=8){ __m256 x=_mm256_add_ps(_mm256_load_ps(a+i),_mm256_load_ps(b+i)); _mm256_store_ps(c+i,x);}
      }
      ts[r]=now()-t; if(ts[r]<best)best=ts[r];
    }
    printf("mode %d (0=nt,1=plain) best %.3f ms\n",mode,best*1e3);
  }
}
