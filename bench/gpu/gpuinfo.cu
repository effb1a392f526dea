/* gpuinfo.cu — the GPU the benchmark runs on, as one JSON object on stdout:
 * its model (cudaGetDeviceProperties), compute capability, SMs, clock, memory, and
 * the FP32 peak those give (SMs x FP32 lanes per SM x 2 x clock) and the dense
 * FP16/BF16 tensor-core peak with FP32 accumulation (SMs x tensor FLOPs per SM per
 * clock x clock; 0 where the table below does not know the architecture).  Exit 1,
 * with the reason on stderr, where no GPU answers. */
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime.h>

/* FP32 lanes per SM by compute capability */
static int fp32_lanes(int major, int minor)
{
	if (major == 7 || (major == 8 && minor == 0))
		return 64; /* Volta, Turing, A100 */
	return 128;        /* GA10x, Ada, Hopper, Blackwell */
}

/* dense FP16/BF16 tensor-core FLOPs per SM per clock, FP32 accumulation, from
 * NVIDIA's architecture whitepapers (V100 125, A100 312, H100 SXM 989 TFLOP/s);
 * Volta has no BF16.  GA10x/Ada vary by product: the data-centre parts' rate. */
static int tensor_flops(int major, int minor)
{
	if (major == 7)
		return 1024;
	if (major == 8)
		return minor == 0 ? 2048 : 1024;
	if (major == 9)
		return 4096;
	return 0;
}

int main(int argc, char **argv)
{
	int dev = argc > 1 ? atoi(argv[1]) : 0, n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);
	if (e != cudaSuccess || n <= dev) {
		fprintf(stderr, "gpuinfo: no GPU %d (%s)\n", dev, e != cudaSuccess ? cudaGetErrorString(e) : "too few");
		return 1;
	}
	struct cudaDeviceProp p;
	int khz = 0;
	if (cudaGetDeviceProperties(&p, dev) != cudaSuccess ||
	    cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, dev) != cudaSuccess) {
		fprintf(stderr, "gpuinfo: cannot read GPU %d's properties\n", dev);
		return 1;
	}
	int driver = 0, runtime = 0;
	cudaDriverGetVersion(&driver);
	cudaRuntimeGetVersion(&runtime);
	double peak = (double)p.multiProcessorCount * fp32_lanes(p.major, p.minor) * 2.0 * khz * 1e3;
	double half = (double)p.multiProcessorCount * tensor_flops(p.major, p.minor) * khz * 1e3;
	printf("{\"name\":\"%s\",\"cc\":\"%d.%d\",\"sms\":%d,\"clock_mhz\":%d,\"memory_gib\":%.1f,"
	       "\"fp32_peak_tflops\":%.1f,\"half_peak_tflops\":%.1f,\"driver\":%d,\"runtime\":%d}\n",
	       p.name, p.major, p.minor, p.multiProcessorCount, khz / 1000, p.totalGlobalMem / 1073741824.0, peak / 1e12,
	       half / 1e12, driver, runtime);
	return 0;
}
