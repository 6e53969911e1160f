#!/usr/bin/env python3
"""CUDA packages without a GPU (issue 5, the CI part): `--target cuda:sm_75,sm_80,sm_90` compiles
the generated CUDA through NVRTC into a cubin per architecture plus PTX, embedded in model.so;
the manifest and `ignis inspect` name the architectures; model.so loads on a machine without
a GPU and says clearly that it needs one (here no GPU is needed: skipped when a GPU is present,
where the GPU golden test runs instead, and when the CUDA toolkit's NVRTC is absent)."""
import json, os, shutil, subprocess, sys, tempfile
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import golden
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

def have_gpu():
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0
    except FileNotFoundError:
        return False

def main():
    golden.require_testdata()
    for m in ("llama-stream-h256", "llama-stream-ksplit", "qwen2-moe-stream", "qwen3-moe-stream"):
        golden.ensure_weights(os.path.join(golden.EXTRA_DIR, m))  # fixtures stored as a recipe
    fails = []
    with tempfile.TemporaryDirectory(prefix="ignis-cuda-") as tmp:
        pkg = os.path.join(tmp, "qwen3")
        p = golden.run(["compile", os.path.join(golden.TESTDATA, "models", "qwen3-qknorm"), "-o", pkg,
                        "--target", "cuda:sm_75,sm_80,sm_90", "--dtype", "bf16"], check=False)
        if p.returncode != 0 and "NVRTC" in p.stderr and "not found" in p.stderr:
            print("SKIP: no NVRTC (CUDA toolkit) on this machine")
            return 77
        if p.returncode != 0:
            print(p.stderr)
            return 1
        for f in ("kernel_sm_75.cubin", "kernel_sm_80.cubin", "kernel_sm_90.cubin", "kernel_compute_90.ptx", "model.cu", "model.c"):
            if not os.path.getsize(os.path.join(pkg, "src", f)):
                fails.append(f"src/{f} is empty")
        so = open(os.path.join(pkg, "model.so"), "rb").read()
        cubin = open(os.path.join(pkg, "src", "kernel_sm_90.cubin"), "rb").read()
        if cubin[:4] != b"\x7fELF" or cubin not in so:
            fails.append("the sm_90 cubin is not an ELF image embedded in model.so")
        m = json.load(open(os.path.join(pkg, "manifest.json")))
        if m.get("target") != "cuda-sm_75,sm_80,sm_90" or m.get("device") != "cuda":
            fails.append(f"manifest target/device: {m.get('target')} {m.get('device')}")
        insp = golden.run(["inspect", pkg]).stdout
        if "sm_75,sm_80,sm_90" not in insp:
            fails.append("inspect does not list the architectures")
        # quantized rows (--quant a16w8 / a16w4): compile, formats, the packer's contract (test_quant)
        import test_quant
        test_quant.cuda_checks("sm_90", tmp, fails, gpu=False)
        # the persistent decode kernel (decode_layers.cu): emitted for a bf16 model whose dims are
        # multiples of 128, compiled by NVRTC for sm_90 (and as an empty stub for sm_80), never
        # for shapes it cannot take (the qwen3-qknorm package above: hidden 64)
        ppkg = os.path.join(tmp, "stream")
        golden.run(["compile", os.path.join(golden.EXTRA_DIR, "llama-stream-h256"), "-o", ppkg,
                    "--target", "cuda:sm_80,sm_90", "--dtype", "bf16"])
        cu, mc = (open(os.path.join(ppkg, "src", f)).read() for f in ("model.cu", "model.c"))
        if '#include "decode_layers.cu"' not in cu or "#define HAS_DECODE_LAYERS 1" not in mc or "decode_layers(st," not in mc:
            fails.append("the persistent decode kernel is missing from the llama-stream-h256 package")
        # it also takes the embedding and the lm_head: the separate launches must then be skipped
        # exactly when it ran, and it must be handed the tables (an unguarded launch computes the
        # step twice; a guarded one with a null table leaves the residual or the logits unset)
        import re
        emb_ok = re.search(r"#define DL_EMB W\(\d+\)", mc) and re.search(r"if \(!dl_done\)\s*\{[^}]*embed ids", mc)
        head_ok = re.search(r"#define DL_HEAD_W W\(\d+\)", mc) and "if (n_out > 0 && !dl_done) {" in mc
        if not emb_ok or not head_ok or "#define DL_VOCAB 320" not in cu:
            fails.append("the persistent kernel's embedding / lm_head and the skipped launches disagree")
        if "if (do_sample && !(dl_done && do_sample == 2))" not in mc:
            fails.append("a greedy one-token step must take the kernel's pick instead of launching the sampler")
        if not re.search(r"if \(!chain\) \{\s*CU\(st->api\.cuMemcpyHtoDAsync\(batch,", mc):
            fails.append("a chained step must not upload the staged batch")
        # matmuls of 2..8 tokens: the tensor-core GEMV (gemv_tc.cu), guarded by the run-time limit
        if not (re.search(r'#define MV_NAME gemv_k\d+_n\d+\w*_tc\n', cu) and '#include "gemv_tc.cu"' in cu
                and "if (T >= 2 && T <= st->mvt_tmax) {" in mc):
            fails.append("the tensor-core GEMV for 2..8 tokens is missing or not guarded by st->mvt_tmax")
        # the host runtime (templates/cuda/host_runtime.c) is the package's, included once, not generated
        if '#include "host_runtime.c"' not in mc or "static int forward(" in mc or "getenv(" in mc:
            fails.append("model.c must include the host runtime and generate no runtime code (nor read the environment)")
        if not os.path.exists(os.path.join(ppkg, "src", "host_runtime.c")):
            fails.append("the package's src/ lacks host_runtime.c")
        # compile-time tuning is in the manifest, and --tune changes the kernel source it names
        mt = json.load(open(os.path.join(ppkg, "manifest.json"))).get("tuning", {})
        if mt.get("at_split_keys") != 64 or mt.get("st_l2hint") != 1:
            fails.append(f"manifest tuning of an untuned package: {mt}")
        tpkg = os.path.join(tmp, "tuned")
        golden.run(["compile", os.path.join(golden.EXTRA_DIR, "llama-stream-h256"), "-o", tpkg, "--target", "cuda:sm_90",
                    "--dtype", "bf16", "--tune", "at_split_keys=128,st_l2hint=0"])
        tcu = open(os.path.join(tpkg, "src", "model.cu")).read()
        tm = json.load(open(os.path.join(tpkg, "manifest.json"))).get("tuning", {})
        if "#define AT_SPLIT_KEYS 128\n" not in tcu or "#define IG_ST_L2HINT 0\n" not in tcu or tm.get("at_split_keys") != 128:
            fails.append(f"--tune at_split_keys=128,st_l2hint=0 not in the source or the manifest: {tm}")
        if "evict_first" in open(os.path.join(tpkg, "src", "kernel_compute_90.ptx")).read():
            fails.append("st_l2hint=0 must compile the weight stream without the L2 policy")
        for bad, needle in (("at_split_keys=0", "at_split_keys"), ("st_group=3", "st_group"), ("nope=1", "nope"),
                            ("persistent=0", "run-time")):
            p = golden.run(["compile", os.path.join(golden.EXTRA_DIR, "llama-stream-h256"), "-o", os.path.join(tmp, "bad"),
                            "--target", "cuda:sm_90", "--tune", bad], check=False)
            if p.returncode == 0 or needle not in p.stderr:
                fails.append(f"--tune {bad} must fail naming {needle}: {p.stderr!r}")
        # MoE layers on the persistent kernel (--tune dl_moe=1; stream_moe.cuh): compiled by NVRTC with
        # the route / selected-experts phases, its table holding the router and the stacked experts, the
        # router's logits handed over; the default (dl_moe=0) leaves MoE decode to moe.cu's kernels; a
        # shared expert (Qwen2-MoE) is one more segment, its gate, gate/up and down in the table
        spkg = os.path.join(tmp, "moe-shared")
        golden.run(["compile", os.path.join(golden.EXTRA_DIR, "qwen2-moe-stream"), "-o", spkg, "--target", "cuda:sm_90",
                    "--dtype", "bf16", "--tune", "dl_moe=1"])
        scu, smc = (open(os.path.join(spkg, "src", f)).read() for f in ("model.cu", "model.c"))
        if "#define DL_MOE_IS 256\n" not in scu or not re.search(r"e\[DL_TAB\] = \{[^}]*W\(lw\[\d+\]\), W\(lw\[\d+\]\), W\(lw\[\d+\]\)\}", smc):
            fails.append("qwen2-moe-stream --tune dl_moe=1: the shared expert is not on the persistent kernel")
        for tune, want in (("dl_moe=1", True), ("dl_moe=0", False)):
            mpkg = os.path.join(tmp, "moe-" + tune)
            golden.run(["compile", os.path.join(golden.EXTRA_DIR, "qwen3-moe-stream"), "-o", mpkg, "--target", "cuda:sm_90",
                        "--dtype", "bf16", "--tune", tune])
            mcu, mmc = (open(os.path.join(mpkg, "src", f)).read() for f in ("model.cu", "model.c"))
            has = ("#define DL_MOE 1\n#define DL_MOE_E 8\n#define DL_MOE_K 3\n#define DL_MOE_I 128\n#define DL_MOE_NORM 0\n" in mcu
                   and "#define DL_MOE_LG moe_lg" in mmc and "#define DL_MLP moe_h" in mmc and "#define HAS_DECODE_LAYERS 1" in mmc)
            if has != want or (not want and '#include "decode_layers.cu"' in mcu):
                fails.append(f"qwen3-moe-stream --tune {tune}: the persistent kernel's MoE layers {'missing' if want else 'present'}")
        # one-head attention items: the split counters are per query head (sized per kv head, the
        # items' merge counters of one group's heads would overrun them)
        if "X(unsigned, attn_cnt, IG_AT_COUNTERS(MV_TMAX, N_HEADS))" not in open(os.path.join(root, "templates", "cuda", "host_runtime.c")).read():
            fails.append("one-head attention items: per-head split counters")
        # the split decode attention kernels split a context only every 64 keys
        if "#define AT_SPLIT_KEYS 64\n" not in cu:
            fails.append("the decode attention instance must split contexts every 64 keys (AT_SPLIT_KEYS)")
        # the graph cache's policy (capture on second sighting, least recently used out) and the host
        # runtime compiled on its own (tuning, batch guard, run length, chained steps), on the host
        cuda_inc = os.path.join(os.environ.get("CUDA_HOME") or "/usr/local/cuda", "include")
        for name in ("test_graph_cache", "test_host_runtime"):
            exe = os.path.join(tmp, name)
            subprocess.run(["cc", "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-Wno-unused-function", "-Wno-unused-parameter",
                            "-I", os.path.join(root, "templates", "cuda"), "-I", os.path.join(root, "common"),
                            "-I", cuda_inc, os.path.join(root, "tests", "cuda_host", name + ".c"), "-o", exe, "-ldl"],
                           check=True)
            p = subprocess.run([exe], capture_output=True, text=True)
            print(f"{name}:", p.stdout.strip())
            if p.returncode != 0:
                fails.append(f"{name}: " + p.stderr.strip())
        # the quantized-KV device code on the host: kv_quant.cuh's warp functions on 32 threads, and the
        # rope_kv / attention / prefill kernels through tests/cuda_host/cuda_emul.h (CTAs of fibers), the
        # decode attention kernels over every KV format and page geometry (test_attn_decode), moe.cu's
        # two-launch decode kernels (test_moe_decode) and tensor-core grouped prefill products
        # (test_moe_grouped), attention_prefill.cu's tensor-core path (test_attn_prefill_tc), sample.cu
        # under token masks (test_sample_masked), the GEMM that runs without cuBLAS (test_gemm) and the
        # persistent decode kernel's GEMV phases in every streamed weight format (test_stream_gemv) and its
        # MoE layers' route / selected experts' gate/up / weighted down phases (test_stream_moe), a8w8's
        # int8 activations and the epilogue of its int8 GEMM (test_act8), the tensor-core GEMV for 2..8 tokens on
        # 16-bit, q8r and q4r rows (test_gemv_tc)
        for name in ("test_kv_quant_warp", "test_kv_quant_kernels", "test_attn_decode", "test_moe_decode", "test_moe_grouped",
                     "test_attn_prefill_tc", "test_sample_masked", "test_gemm", "test_stream_gemv", "test_stream_moe", "test_act8",
                     "test_gemv_tc"):
            exe = os.path.join(tmp, name)
            subprocess.run(["g++", "-std=c++20", "-O2", "-ffp-contract=off", "-pthread", "-Wall", "-Werror", "-Wno-unknown-pragmas",
                            "-Wno-unused-function", "-Wno-unused-variable", "-Wno-unused-but-set-variable",
                            "-I", os.path.join(root, "templates", "cuda"), "-I", os.path.join(root, "templates", "cpu"),
                            "-I", os.path.join(root, "tests", "cuda_host"),
                            os.path.join(root, "tests", "cuda_host", name + ".cpp"), "-o", exe], check=True)
            p = subprocess.run([exe], capture_output=True, text=True)
            print(p.stdout.strip().splitlines()[-1])
            if p.returncode != 0:
                fails.append(f"{name}: " + "; ".join(l for l in p.stdout.splitlines() if l.startswith("FAIL")))
        # the quantized tensor-core GEMM (qgemm.cu: ldmatrix / mma.sync as the emulation's warp-collective
        # stand-ins) against its double reference, with bf16 and with half as the 16-bit type
        for f16 in ("0", "1"):
            exe = os.path.join(tmp, "test_qgemm" + f16)
            subprocess.run(["g++", "-std=c++20", "-O2", "-ffp-contract=off", "-pthread", "-Wall", "-Werror", "-Wno-unknown-pragmas",
                            "-Wno-unused-function", "-Wno-unused-variable", "-Wno-unused-but-set-variable", "-x", "c++",
                            "-DQG_HOST_EMUL", "-DIG_F16=" + f16, "-I", os.path.join(root, "templates", "cuda"),
                            "-I", os.path.join(root, "templates", "cpu"), "-I", os.path.join(root, "tests", "cuda_host"),
                            os.path.join(root, "tests", "gpu", "test_qgemm.cu"), "-o", exe], check=True)
            p = subprocess.run([exe], capture_output=True, text=True)
            print(("f16 " if f16 == "1" else "bf16 ") + p.stdout.strip().splitlines()[-1])
            if p.returncode != 0:
                fails.append("test_qgemm (host): " + "; ".join(l for l in p.stdout.splitlines() if l.startswith("FAIL")))
        if '#include "decode_layers.cu"' in open(os.path.join(pkg, "src", "model.cu")).read():
            fails.append("the persistent decode kernel was emitted for hidden 64 (its K must be a multiple of 128)")
        # rows longer than a 16 KB slot (down K = 8448) take two slots each; a residual add then gets at
        # most 128 rows per CTA (one batch of sums), which the host checks before turning the kernel on
        golden.ensure_weights(os.path.join(golden.EXTRA_DIR, "llama-stream-ksplit"))
        golden.run(["compile", os.path.join(golden.EXTRA_DIR, "llama-stream-ksplit"), "-o", os.path.join(tmp, "ks"),
                    "--target", "cuda:sm_90", "--dtype", "bf16"])
        kcu, kmc = (open(os.path.join(tmp, "ks", "src", f)).read() for f in ("model.cu", "model.c"))
        if '#include "decode_layers.cu"' not in kcu or "#define DL_RESID_ROWS 128 " not in kmc:
            fails.append("the persistent kernel must take a down projection of K 8448 (two slots a row), 128 rows a CTA")
        # its weight copies carry an L2 evict-first policy (the stream must not push the K/V pages and
        # activations out of L2), unless IG_ST_L2HINT is 0
        kptx = open(os.path.join(tmp, "ks", "src", "kernel_compute_90.ptx")).read()
        if not ("createpolicy.fractional.L2::evict_first" in kptx
                and "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint" in kptx):
            fails.append("the persistent kernel's weight copies must carry the L2 evict-first policy")
        # f16 (IEEE half weights, KV and 16-bit activations): every kernel but the persistent one (bf16
        # only) compiles with IG_F16 for each architecture; the manifest says f16; the CPU refuses it
        golden.run(["compile", os.path.join(golden.EXTRA_DIR, "llama-stream-h256"), "-o", os.path.join(tmp, "h16"),
                    "--target", "cuda:sm_75,sm_80,sm_90", "--dtype", "f16"])
        hcu = open(os.path.join(tmp, "h16", "src", "model.cu")).read()
        hm = json.load(open(os.path.join(tmp, "h16", "manifest.json")))
        if ("#define IG_F16 1" not in hcu or '#include "decode_layers.cu"' in hcu or hm.get("dtype") != "f16"
                or hm.get("kv_dtype") != "f16" or "W_F16 1" not in open(os.path.join(tmp, "h16", "src", "model.c")).read()):
            fails.append("an f16 CUDA package: IG_F16, no persistent kernel, manifest dtype f16, half cuBLAS")
        p = golden.run(["compile", os.path.join(golden.TESTDATA, "models", "llama-gqa"), "-o", os.path.join(tmp, "hc"),
                        "--dtype", "f16"], check=False)
        if p.returncode == 0 or "f16" not in p.stderr or "CUDA" not in p.stderr:
            fails.append(f"--dtype f16 on the CPU must be refused, naming it: {p.stderr!r}")
        p = golden.run(["compile", os.path.join(golden.EXTRA_DIR, "llama-stream-h256"), "-o", os.path.join(tmp, "s32"),
                        "--target", "cuda:sm_90", "--dtype", "f32"])
        if '#include "decode_layers.cu"' in open(os.path.join(tmp, "s32", "src", "model.cu")).read():
            fails.append("the persistent decode kernel was emitted for an f32 package (it is bf16 only)")
        # quantized KV (issue 17, templates/cuda/kv_quant.cuh): NVRTC compiles the int8 / uint4 / fp8 kernels
        # for every architecture; the instances carry the format, pages are sized by it, the
        # persistent decode kernel is left out (--tune dl_kvq=0 for a model it would take, an f32
        # package, a Qwen3 with its q/k norms); pages not a multiple of 8 are refused
        for kv, bits, dt, model in (("int8", 8, "bf16", "llama-stream-h256"), ("uint4", 4, "f32", "qwen3-bias-hd64"),
                                    ("fp8", 0xe4, "bf16", "qwen3-bias-hd64")):
            qdir = os.path.join(tmp, "kv" + kv)
            golden.ensure_weights(os.path.join(golden.EXTRA_DIR, model))
            golden.run(["compile", os.path.join(golden.EXTRA_DIR, model), "-o", qdir, "--target", "cuda:sm_75,sm_80,sm_90",
                        "--dtype", dt, "--kv-cache", kv] + (["--tune", "dl_kvq=0"] if "stream" in model else []))
            qcu, qmc = (open(os.path.join(qdir, "src", f)).read() for f in ("model.cu", "model.c"))
            qm = json.load(open(os.path.join(qdir, "manifest.json")))
            cfg = json.load(open(os.path.join(golden.EXTRA_DIR, model, "config.json")))
            d = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
            kvh = cfg.get("num_key_value_heads") or cfg["num_attention_heads"]
            ps = 64 if kv == "uint4" else 16  # the default page size (uint4: its delta-coded keys, kv_quant.h)
            layer_page = 2 * kvh * ps * (d * (8 if bits == 0xe4 else bits) // 8 + 3)
            if (f"#define AT_KVQ {bits}\n" not in qcu or f"#define RK_KVQ {bits}\n" not in qcu or f"#define AP_KVQ {bits}\n" not in qcu
                    or f"#define KV_LAYER_PAGE_BYTES {layer_page}ull" not in qmc or '#include "decode_layers.cu"' in qcu
                    or qm.get("kv_dtype") != kv or qm.get("page_size") != ps
                    or qm.get("kv_bytes_per_token") != cfg["num_hidden_layers"] * layer_page // ps):
                fails.append(f"--kv-cache {kv} on CUDA: instances, page bytes ({layer_page} a layer), persistent kernel or manifest wrong")
        # by default (dl_kvq=1) the persistent decode kernel over int8 KV (attn_decode.cuh in its items), through NVRTC
        qdir = os.path.join(tmp, "kvint8dl")
        golden.run(["compile", os.path.join(golden.EXTRA_DIR, "llama-stream-h256"), "-o", qdir, "--target", "cuda:sm_90",
                    "--dtype", "bf16", "--kv-cache", "int8"])
        qcu = open(os.path.join(qdir, "src", "model.cu")).read()
        if '#include "decode_layers.cu"' not in qcu or "#define AT_DEVFN 1" not in qcu or "#define AT_KVQ 8" not in qcu:
            fails.append("--kv-cache int8 (dl_kvq=1 by default): no persistent decode kernel over int8 KV")
        p = golden.run(["compile", os.path.join(golden.TESTDATA, "models", "llama-gqa"), "-o", os.path.join(tmp, "kvps"),
                        "--target", "cuda:sm_90", "--kv-cache", "int8", "--page-size", "12"], check=False)
        if p.returncode == 0 or "--kv-cache int8" not in p.stderr or "multiples of 8" not in p.stderr:
            fails.append(f"--kv-cache int8 --page-size 12 on CUDA must be refused: {p.stderr!r}")
        # sm_70 (CUDA 13's NVRTC dropped Volta): compiled beside sm_80/sm_90 with the CUDA 12 NVRTC
        # (PyPI nvidia-cuda-nvrtc-cu12, installed by scripts/install-deps.sh); without one, an error
        # that names sm_70 and says what to install
        try:
            import nvidia.cuda_nvrtc  # noqa: F401
            have12 = True
        except ImportError:
            have12 = False
        vdir = os.path.join(tmp, "v")
        p = golden.run(["compile", os.path.join(golden.TESTDATA, "models", "llama-gqa"), "-o", vdir,
                        "--target", "cuda:sm_70,sm_80,sm_90", "--dtype", "f32"], check=False)
        if have12:
            if p.returncode != 0:
                fails.append(f"sm_70,sm_80,sm_90 with the CUDA 12 NVRTC installed: {p.stderr!r}")
            else:
                for a in ("sm_70", "sm_80", "sm_90"):
                    c = open(os.path.join(vdir, "src", f"kernel_{a}.cubin"), "rb").read()
                    if c[:4] != b"\x7fELF":
                        fails.append(f"kernel_{a}.cubin is not an ELF image")
        elif p.returncode == 0 or "sm_70" not in p.stderr or "nvidia-cuda-nvrtc-cu12" not in p.stderr:
            fails.append(f"sm_70 without a CUDA 12 NVRTC: {p.returncode} {p.stderr!r}")
        print("sm_70:", "compiled" if p.returncode == 0 else p.stderr.strip().splitlines()[-1])
        # issue 21's dense families on CUDA (NVRTC here, no GPU): Phi-3 (fused projections split at
        # import); GLM-4 (partial rotary with interleaved pairs, post-norms); Gemma 3 (sliding-window
        # and global layers with two RoPE bases, GeGLU, scaled embeddings, query_pre_attn_scalar,
        # post-norms); Mistral with a window shorter than the context. Each compiles, its model.cu
        # has the kernel features its graph needs and no persistent decode kernel (Llama-only)
        if os.path.isdir(os.path.join(golden.TESTDATA, "models", "phi3")):
            golden.run(["compile", os.path.join(golden.TESTDATA, "models", "phi3"), "-o", os.path.join(tmp, "phi3"),
                        "--target", "cuda:sm_90", "--dtype", "bf16"])
            wdir = os.path.join(tmp, "mistral-window8")  # as tests/test_sliding_window.py makes it
            os.makedirs(wdir)
            src = os.path.join(golden.TESTDATA, "models", "mistral-sharded")
            for f in os.listdir(src):
                if f != "config.json":
                    os.symlink(os.path.join(src, f), os.path.join(wdir, f))
            cfg = json.load(open(os.path.join(src, "config.json")))
            cfg["sliding_window"] = 8
            json.dump(cfg, open(os.path.join(wdir, "config.json"), "w"))
            want = {
                "glm4": ["#define RK_ROT 16\n#define RK_INTERLEAVE 1\n", "#define AT_ROT 16\n#define AT_INTERLEAVE 1\n",
                         "#define RN_ADD 1\n", "#define AT_WINDOW 0\n"],
                "gemma3": ["#define AT_WINDOW 8\n", "#define AP_WINDOW 8\n", "#define AT_WINDOW 0\n", "#define MV_EPI 3\n",
                           "#define EP_GELU 1\n", "#define RN_ADD 1\n", "#define EM_SCALE ((float)11.31370849898476",
                           "#define AT_SCALE 0.176776695f\n", "#define AT_QKNORM 1\n"],
                "mistral-window8": ["#define AT_WINDOW 8\n", "#define AP_WINDOW 8\n"],
            }
            for model, needles in want.items():  # (one architecture, f32 for one model: NVRTC time)
                mdir = wdir if model == "mistral-window8" else os.path.join(golden.TESTDATA, "models", model)
                for dt in ("bf16", "f32") if model == "gemma3" else ("bf16",):
                    out = os.path.join(tmp, f"{model}-{dt}")
                    p = golden.run(["compile", mdir, "-o", out, "--target", "cuda:sm_90", "--dtype", dt], check=False)
                    if p.returncode != 0:
                        fails.append(f"{model} {dt} on CUDA: compile failed: {p.stderr.strip()[-300:]!r}")
                        continue
                    cu, mc = (open(os.path.join(out, "src", f)).read() for f in ("model.cu", "model.c"))
                    miss = [n for n in needles if n not in cu]
                    if miss:
                        fails.append(f"{model} {dt} on CUDA: model.cu lacks {miss}")
                    if '#include "decode_layers.cu"' in cu or "#define HAS_DECODE_LAYERS 0" not in mc:
                        fails.append(f"{model} {dt} on CUDA: the persistent decode kernel must stay off")
                    if model == "gemma3" and ("#define ROPE_LOCAL 1" not in mc or "layer_sliding[N_LAYERS]" not in mc
                                              or "layer_sliding[l] ? inv_freq + sizeof rope_inv_freq : inv_freq" not in mc
                                              or not re.search(r"LAUNCH\(layer_sliding\[l\] \? \d+ : \d+,", mc)):
                        fails.append("gemma3 on CUDA: its layers must pick their window kernels and RoPE table per layer")
                    if model == "mistral-window8" and "layer_sliding[l]" in mc:
                        fails.append("mistral-window8: every layer has the window, no per-layer choice expected")
            # mixture of experts (moe.cu: router, the selected experts' gate/up and down; prefill
            # grouped by expert), the shared expert of Qwen2-MoE; MoE under --tp is not on CUDA yet
            # and is refused by name
            # (the grouped products on tensor cores where D and I are multiples of 32: not Qwen2-MoE's
            # routed experts of 48; and not in a package that also targets sm_75)
            for model, needles, tc, cg in (("qwen3-moe", ["#define MO_E 8\n#define MO_TOPK 2\n", "#define MO_NORM 1\n"], 1, 0),
                                           ("qwen2-moe-shared", ["#define MO_E 6\n", "#define MO_NORM 0\n", "#define MO_SHARED 1\n"], 1, 1),
                                           ("mixtral", ["#define MO_E 4\n#define MO_TOPK 2\n", "#define MO_NORM 1\n"], 1, 0),
                                           ("qwen3-moe@sm_75", [], 0, 1)):
                model, arch = (model.split("@") + ["sm_90"])[:2]
                out = os.path.join(tmp, model + arch)
                p = golden.run(["compile", os.path.join(golden.TESTDATA, "models", model), "-o", out, "--target",
                                "cuda:sm_90" if arch == "sm_90" else f"cuda:{arch},sm_90", "--dtype", "bf16"], check=False)
                if p.returncode != 0:
                    fails.append(f"{model} on CUDA: compile failed: {p.stderr.strip()[-300:]!r}")
                    continue
                cu, mc = (open(os.path.join(out, "src", f)).read() for f in ("model.cu", "model.c"))
                miss = [n for n in needles + ['#include "moe.cu"'] if n not in cu]
                grouped = "if (T > MV_TMAX) { /* prefill: tokens grouped by expert" in mc and "X(float, moe_y," in mc
                if miss or "X(int32_t, moe_sel," not in mc or not grouped or '#include "decode_layers.cu"' in cu:
                    fails.append(f"{model} on CUDA: model.cu lacks {miss} or the MoE scratch / persistent kernel is wrong")
                has_tc = '_gu_tc"' in mc and '_down_tc"' in mc and "moe_xb," in mc
                has_cg = '_gu_grouped"' in mc and '_down_grouped"' in mc
                # steps of up to 8 tokens: the two-launch decode (_dgu, _ddown) with its counters
                if ("if (T <= IG_MO_DTMAX) {" not in mc or '_dgu"' not in mc or '_ddown"' not in mc
                        or "X(unsigned, moe_sync, 2)" not in mc):
                    fails.append(f"{model} for {arch}: no two-launch MoE decode (moe.cu _dgu / _ddown) in model.c")
                # the lone rms_norm folded into _dgu where the routed block is its only reader (not
                # Qwen2-MoE's: its shared expert reads the norm after the routed block's add)
                folded = "the layer's rms_norm in _dgu" in mc and "if (T > IG_MO_DTMAX) { void *args[]" in mc
                if folded != (model != "qwen2-moe-shared"):
                    fails.append(f"{model} for {arch}: rms_norm folded into _dgu: {folded}")
                if has_tc != bool(tc) or has_cg != bool(cg):
                    fails.append(f"{model} for {arch}: tensor-core grouped products {has_tc} (expected {bool(tc)}), "
                                 f"CUDA-core grouped {has_cg} (expected {bool(cg)})")
            # --tune moe_dec=0: the per-op router, gate/up and down kernels only
            out = os.path.join(tmp, "moe-nodec")
            p = golden.run(["compile", os.path.join(golden.TESTDATA, "models", "qwen3-moe"), "-o", out, "--target", "cuda:sm_90",
                            "--dtype", "bf16", "--tune", "moe_dec=0"], check=False)
            mc = open(os.path.join(out, "src", "model.c")).read() if p.returncode == 0 else ""
            if p.returncode != 0 or '_dgu"' in mc or "moe_sync" in mc or '_gu"' not in mc:
                fails.append(f"qwen3-moe --tune moe_dec=0: the two-launch decode still emitted, or the compile failed: "
                             f"{p.stderr.strip()[-200:]!r}")
            p = golden.run(["compile", os.path.join(golden.TESTDATA, "models", "qwen3-moe"), "-o", os.path.join(tmp, "moetp"),
                            "--target", "cuda:sm_90", "--tp", "2"], check=False)
            if p.returncode == 0 or "moe" not in p.stderr or "tensor parallelism" not in p.stderr:
                fails.append(f"qwen3-moe --tp 2 on CUDA: not refused by name: {p.stderr.strip()[-200:]!r}")
        # bad targets
        p = golden.run(["compile", os.path.join(golden.TESTDATA, "models", "qwen3-qknorm"), "-o", os.path.join(tmp, "x"),
                        "--target", "cuda:sm_42"], check=False)
        if p.returncode == 0 or "sm_42" not in p.stderr:
            fails.append(f"unknown architecture not named: {p.stderr!r}")
        if not have_gpu():
            p = golden.run(["generate", pkg, "--tokens", "1,2,3"], check=False)
            if p.returncode == 0 or p.returncode > 100 or not ("GPU" in p.stderr or "CUDA" in p.stderr):
                fails.append(f"running a CUDA package without a GPU: exit {p.returncode}, {p.stderr!r}")
            print("no GPU:", p.stderr.strip())
    for f in fails:
        print("FAIL:", f)
    return 1 if fails else 0

if __name__ == "__main__":
    sys.exit(main())
