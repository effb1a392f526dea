// gpu.mjs — a server that believes it has GPUs, for the suites that test GPU
// scheduling, the form's device choices and precision without a GPU: the
// scheduler lists DEEPDESK_FAKE_GPUS simulated GPUs, and the CUDA plugin is a
// stand-in of this build's backend API version whose create and create_group wait
// a while and then fail ("stand-in plugin: no GPU answers"), so a cuda job starts,
// holds its GPUs, and ends in error with the plugin's own message.
import { readFileSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { startServer, ROOT } from './server.mjs';

/** Build the stand-in plugin in dir; its creates wait ms first.  Its path. */
export function standInPlugin(dir, ms = 0) {
  const impl = readFileSync(join(ROOT, 'networks', 'backend_impl.h'), 'utf8');
  const version = Number(/#define BACKEND_API_VERSION (\d+)/.exec(impl)[1]);
  const src = join(dir, 'standin.c');
  writeFileSync(src, `#include <stdio.h>
#include <unistd.h>
struct dd_err { int code; char msg[480]; };
const int deepdesk_backend_api_version = ${version};
int deepdesk_cuda_create(const void *host, void **out, struct dd_err *err)
{
	*out = 0;
	usleep(${ms * 1000});
	if (err) { err->code = -1; snprintf(err->msg, sizeof err->msg, "stand-in plugin: no GPU answers"); }
	return -1;
}
int deepdesk_cuda_create_group(const void *host, int n, const int *devices, void **out, struct dd_err *err)
{
	for (int i = 0; i < n; i++)
		out[i] = 0;
	return deepdesk_cuda_create(host, out, err);
}
int deepdesk_cuda_devices(void *out, int max, struct dd_err *err) { return 0; }
`);
  execFileSync('cc', ['-shared', '-fPIC', '-o', join(dir, 'standin.so'), src]);
  return join(dir, 'standin.so');
}

/** startServer(opts) with gpus simulated GPUs and plugin (standInPlugin's path) as
 *  its CUDA plugin; the environment is put back after. */
export async function startFakeGpuServer({ gpus, plugin, ...opts }) {
  process.env.DEEPDESK_FAKE_GPUS = String(gpus);
  process.env.DEEPDESK_CUDA_PLUGIN = plugin;
  try {
    return await startServer(opts);
  } finally {
    delete process.env.DEEPDESK_FAKE_GPUS;
    delete process.env.DEEPDESK_CUDA_PLUGIN;
  }
}
