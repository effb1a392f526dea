"""manifest.py — what layers.py and solver.py share: seeded float32 values handed
over as float64 (so both sides start from the same numbers), and the folder they
write for the C tests: NNN_<tensor>.f32 files (raw little-endian float32, C order)
and manifest.json, {"torch": version, "cases": [...]}, each case naming its
tensors as {tensor: {"file", "shape"}}.

Importing it is the scripts' torch check: an interpreter without torch exits 77
here (the C tests skip).  torch runs on one thread, as the C side does."""
import json
import os
import sys

try:
    import torch
except ImportError:
    sys.exit(77)

torch.set_num_threads(1)


def seeded(seed):
    """(gen, rand): a generator seeded with seed, and rand_from(gen)"""
    gen = torch.Generator().manual_seed(seed)
    return gen, rand_from(gen)


def rand_from(gen):
    """rand(*shape, lo=-1.0, hi=1.0): float32 values in [lo, hi) drawn from gen, as float64"""
    def rand(*shape, lo=-1.0, hi=1.0):
        """float32 values, returned as float64 so that both sides start from the same numbers"""
        return (torch.rand(*shape, generator=gen, dtype=torch.float32) * (hi - lo) + lo).double()
    return rand


def put(folder, idx, tensors, tname, t):
    """t as folder/<idx>_<tname>.f32, recorded in tensors (a case's "tensors")"""
    fname = "%03d_%s.f32" % (idx, tname)
    t.detach().to(torch.float32).contiguous().numpy().astype("<f4").tofile(os.path.join(folder, fname))
    tensors[tname] = {"file": fname, "shape": list(t.shape)}


def write_manifest(folder, cases):
    """folder/manifest.json: this torch's version and the cases"""
    with open(os.path.join(folder, "manifest.json"), "w") as f:
        json.dump({"torch": torch.__version__, "cases": cases}, f, indent=1)
