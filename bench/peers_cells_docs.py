"""results.md's peers and compression figures as measured: each cell's result file (`python -m bench peers`) and
the command that measured it. How the figures show them, and their notes, are bench/peers_docs.py's."""

from __future__ import annotations

from bench.docs_figure import Figure
from bench.peers_docs import (COMPRESSION_NOTE, PEERS_NOTE, compression_headline, compression_render,
                              peers_headline, peers_render)

PEERS_FILES = (  # in the order measured: a later cell of the same job, budget, host and malloc replaces one
    "peers-mnist1d-unbudgeted-2026-11-26.json", "peers-mnist1d-cpu040-2026-11-26.json",
    "peers-resnet-unbudgeted-2026-11-26.json", "peers-resnet-cpu040-2026-11-26.json",
    "peers-resnet-unbudgeted-2026-11-27.json", "peers-resnet-unbudgeted-tcmalloc-2026-11-27.json",
    "peers-mnist1d-unbudgeted-tcmalloc-2026-11-27.json",
    "peers-resnet-unbudgeted-tcmalloc-nosync-2026-11-27.json", "peers-mnist1d-cpu040-tcmalloc-2026-11-27.json",
    "peers-resnet-unbudgeted-tcmalloc-nospin-2026-11-27.json", "peers-resnet-cpu040-tcmalloc-2026-11-27.json",
    "peers-resnet-unbudgeted-xeon16-2026-11-27.json", "peers-mnist1d-unbudgeted-xeon16-2026-11-27.json",
    "peers-mnist1d-unbudgeted-tcmalloc-staged-2026-11-27.json",
    "peers-resnet-unbudgeted-tcmalloc-staged-2026-11-27.json",
    "peers-resnet-unbudgeted-xeon16-ce5517b-2026-11-27.json",
    "peers-mnist1d-unbudgeted-xeon16-ce5517b-2026-11-27.json",
    "peers-mnist1d-unbudgeted-tcmalloc-main-2026-11-27.json",
    "peers-resnet-unbudgeted-tcmalloc-main-2026-11-27.json",
    "peers-resnet-cpu040-tcmalloc-main-2026-11-27.json",
    "peers-mnist1d-cpu040-tcmalloc-main-2026-11-27.json",
    "peers-resnet-unbudgeted-xeon16-prefetch-2026-11-27.json",
    "peers-mnist1d-cpu040-tcmalloc-standby-2026-11-28.json",
    "peers-mnist1d-unbudgeted-tcmalloc-v595-2026-11-28.json",
    "peers-resnet-unbudgeted-tcmalloc-v595-2026-11-28.json",
    "peers-mnist1d-cpu040-tcmalloc-v595-2026-11-28.json",
    "peers-resnet-cpu040-tcmalloc-v595-2026-11-28.json",
    "peers-resnet-unbudgeted-tcmalloc-nosync-v595-2026-11-28.json",
    "peers-resnet-unbudgeted-tcmalloc-startup-v595-2026-11-28.json",
    "peers-mnist1d-unbudgeted-tcmalloc-startup-v595-2026-11-28.json",
    "peers-resnet-lo50-tcmalloc-v595-2026-11-28.json",
    "peers-resnet-lo50-switched-tcmalloc-v595-2026-11-28.json",
    "peers-bigvocab-unbudgeted-tcmalloc-v595-2026-11-28.json",
    "peers-tabular-unbudgeted-tcmalloc-v595-2026-11-29.json",
    "peers-residualmlp-unbudgeted-tcmalloc-v595-2026-11-29.json",
    "peers-plaincnn1d-decay-unbudgeted-tcmalloc-v595-2026-11-29.json")  # last: the README's headline names it

COMPRESSION_FILES = ("peers-resnet-lo50-compression-v595-2026-11-29.json",
                     "peers-resnet-lo50-switched-bf16-v595-2026-11-29.json",
                     "peers-resnet-unbudgeted-compression-v595-2026-11-29.json",
                     "peers-mnist1d-unbudgeted-compression-v595-2026-11-29.json")  # last: the headline names it

FIGURES = (
    Figure("peers", "Against what TensorFlow users run: MultiWorkerMirroredStrategy and one process",
           PEERS_FILES,
           ("python -m bench peers --job jobs/mnist1d_cnn.yaml --seeds S --variants single,mwms,bsp,default "
            "--target 0.95 --add-to F (seeds 1,2,3 then 4,5 per call, nothing else running)",
            "python -m bench peers --job jobs/mnist1d_cnn.yaml --cpus-per-node 0.4 --seeds S --variants "
            "mwms,bsp,default --target 0.95 --add-to F (one seed per call, nothing else running)",
            "python -m bench peers --job jobs/resnet_synthetic.yaml --seeds S --variants mwms,single,bsp,default "
            "--target 0.9 --add-to F --out G (one seed per call, nothing else running)",
            "python -m bench peers --job jobs/resnet_synthetic.yaml --cpus-per-node 0.4 --seeds S --variants "
            "mwms,bsp,default --target 0.9 --add-to F --out G (one seed per call, nothing else running)",
            "python -m bench peers --job jobs/resnet_synthetic.yaml --seeds S --variants "
            "mwms,single,bsp,default,no-sync --target 0.9 --add-to F --out G (one seed per call, nothing else "
            "running; the fc-v657 host)",
            "python -m bench peers --job jobs/resnet_synthetic.yaml --seeds S --variants "
            "mwms,single,bsp,default,no-sync --target 0.9 --allocator tcmalloc --add-to F --out G (one seed per "
            "call, nothing else running; the fc-v657 host)",
            "python -m bench peers --job jobs/mnist1d_cnn.yaml --seeds S --variants mwms,single,bsp,default "
            "--target 0.95 --allocator tcmalloc --add-to F --out G (one seed per call, nothing else running; the "
            "fc-v657 host)",
            "python -m bench peers --job jobs/resnet_synthetic.yaml --seeds S --variants "
            "mwms,tf-no-sync,bsp,no-sync --target 0.9 --allocator tcmalloc --add-to F --out G (one seed per call, "
            "nothing else running; the fc-v657 host)",
            "python -m bench peers --job jobs/mnist1d_cnn.yaml --cpus-per-node 0.4 --seeds S --variants "
            "mwms,bsp,default --target 0.95 --allocator tcmalloc --add-to F --out G (one seed per call, nothing else "
            "running; the fc-v657 host)",
            "python -m bench peers --job jobs/resnet_synthetic.yaml --seeds S --variants mwms,bsp,default --target "
            "0.9 --allocator tcmalloc --add-to F --out G (one seed per call, nothing else running; the fc-v657 host; "
            "513fb72: nodes sharing cores do not spin)",
            "python -m bench peers --job jobs/resnet_synthetic.yaml --cpus-per-node 0.4 --seeds S --variants "
            "mwms,bsp,default --target 0.9 --allocator tcmalloc --add-to F --out G (seeds 1, 2, 3 one per quiet call, "
            "then 4,5 in one; the fc-v657 host; f229f1c)",
            "python -m bench peers --job jobs/resnet_synthetic.yaml --seeds S --variants "
            "single,mwms,bsp,default,no-sync --add-to F --out G (one seed per call, on a lent 16-core machine with "
            "nothing else running; the default target, 0.95, which no ResNet run reaches: no time to accuracy)",
            "python -m bench peers --job jobs/mnist1d_cnn.yaml --seeds 1 --variants mwms,bsp,default,no-sync (the "
            "same lent machine; one seed: the lease's minutes ran out)",
            "python -m bench peers --job jobs/mnist1d_cnn.yaml --seeds S --variants mwms,bsp,default --target 0.95 "
            "--allocator tcmalloc --add-to F --out G (one seed per quiet call; the fc-v657 host; 4732653)",
            "python -m bench peers --job jobs/resnet_synthetic.yaml --seeds S --variants mwms,bsp,default,no-sync "
            "--target 0.9 --allocator tcmalloc --add-to F --out G (one seed per quiet call; the fc-v657 host; "
            "4732653)",
            "python -m bench peers --job jobs/resnet_synthetic.yaml --seeds S --variants mwms,bsp,default --target 0.9 "
            "--add-to F --out G (a lent 16-core machine, nothing else running, ce5517b: seeds 1-4 in one call, 5 in a "
            "second, the two files joined by bench.peers.summarize)",
            "python -m bench peers --job jobs/mnist1d_cnn.yaml --seeds 1 --variants mwms,bsp,default --target 0.95 "
            "(the same lent machine and commit; one seed: the lease's minutes ran out)",
            "python -m bench peers --job jobs/mnist1d_cnn.yaml --seeds S --variants mwms,bsp,default --target 0.95 "
            "--allocator tcmalloc --add-to F --out G (one seed per quiet call; the fc-v657 host; e3fe8a6, the code of "
            "ce5517b)",
            "python -m bench peers --job jobs/resnet_synthetic.yaml --seeds S --variants mwms,bsp,default --target 0.9 "
            "--allocator tcmalloc --add-to F --out G --runs-dir D (one seed per quiet call, D a folder of the cell's "
            "own; the fc-v657 host; e3fe8a6)",
            "python -m bench peers --job jobs/resnet_synthetic.yaml --cpus-per-node 0.4 --seeds S --variants "
            "mwms,bsp,default --target 0.9 --allocator tcmalloc --add-to F --out G --runs-dir D (one seed per quiet "
            "call, D a folder of the seed's own; the fc-v657 host; 10a5d37)",
            "python -m bench peers --job jobs/mnist1d_cnn.yaml --cpus-per-node 0.4 --seeds S --variants "
            "mwms,bsp,default --target 0.95 --allocator tcmalloc --add-to F --out G --runs-dir D (one seed per quiet "
            "call, D a folder of the seed's own; the fc-v657 host; 10a5d37)",
            "python -m bench peers --job jobs/resnet_synthetic.yaml --seeds S --variants mwms,bsp --target 0.9 "
            "--add-to F, then --variants bsp on the tree with the prefetch (a lent 16-core machine, nothing else "
            "running, a8ec623 and 30a9ec4's change, order alternating by seed; the two files joined by "
            "bench.peers.summarize)",
            "python -m bench peers --job jobs/mnist1d_cnn.yaml --cpus-per-node 0.4 --seeds S --variants "
            "mwms,bsp,default --target 0.95 --allocator tcmalloc --add-to F --out G --runs-dir D (one seed per quiet "
            "call, D a folder of the seed's own; the fc-v657 host; 4985e0b)",
            "python -m bench peers --job jobs/mnist1d_cnn.yaml --seeds S --variants single,mwms,bsp,default --target "
            "0.95 --allocator tcmalloc --add-to F --out G --runs-dir D (one seed per quiet call, D a folder of the "
            "seed's own; the fc-v595 host; 1bedbc0)",
            "python -m bench peers --job jobs/resnet_synthetic.yaml --seeds S --variants single,mwms,bsp,default "
            "--target 0.9 --allocator tcmalloc --add-to F --out G --runs-dir D (one seed per quiet call, D a folder "
            "of the seed's own; the fc-v595 host; 1bedbc0)",
            "python -m bench peers --job jobs/mnist1d_cnn.yaml --cpus-per-node 0.4 --seeds S --variants "
            "mwms,bsp,default --target 0.95 --allocator tcmalloc --add-to F --out G --runs-dir D (one seed per quiet "
            "call, D a folder of the seed's own; the fc-v595 host; 1bedbc0)",
            "python -m bench peers --job jobs/resnet_synthetic.yaml --cpus-per-node 0.4 --seeds S --variants "
            "mwms,bsp,default --target 0.9 --allocator tcmalloc --add-to F --out G --runs-dir D (one seed per quiet "
            "call, D a folder of the seed's own; the fc-v595 host; 1bedbc0)",
            "python -m bench peers --job jobs/resnet_synthetic.yaml --seeds S --variants mwms,tf-no-sync,bsp,no-sync "
            "--target 0.9 --allocator tcmalloc --add-to F --out G --runs-dir D (one seed per quiet call, D a folder "
            "of the seed's own; the fc-v595 host; ff458df)",
            "python -m bench peers --job jobs/resnet_synthetic.yaml --seeds S --variants single,mwms,bsp,default "
            "--target 0.9 --allocator tcmalloc --add-to F --out G --runs-dir D (one seed per quiet call, D a folder "
            "of the seed's own; the fc-v595 host; acc7634, after the two start-up cuts)",
            "python -m bench peers --job jobs/mnist1d_cnn.yaml --seeds S --variants single,mwms,bsp,default "
            "--target 0.95 --allocator tcmalloc --add-to F --out G --runs-dir D (one seed per quiet call, D a folder "
            "of the seed's own; the fc-v595 host; 886af56)",
            "python -m bench peers --job bench/probes/big_vocab.yaml --seeds S --variants single,mwms,bsp,default "
            "--target 0.95 --allocator tcmalloc --add-to F --out F --runs-dir D (one seed per quiet call, D a folder "
            "of the seed's own; the fc-v595 host; 4ab9c7d, whose tree differed from its commit in "
            "docs/protocols.md only)",
            "python -m bench peers --job jobs/resnet_synthetic.yaml --seeds S --variants mwms,bsp,default,switched "
            "--target 0.9 --allocator tcmalloc --loopback-mbit 50 --add-to F --out F --runs-dir D (one seed per quiet "
            "call, D a folder of the seed's own; the fc-v595 host; 4ff637d)",
            "python -m bench peers --job jobs/resnet_synthetic.yaml --seeds S --variants mwms,bsp,switched "
            "--target 0.9 --allocator tcmalloc --loopback-mbit 50 --add-to F --out F --runs-dir D (one seed per quiet "
            "call, D a folder of the seed's own; the fc-v595 host; 92430b5, the guard's stall rule waiting for the "
            "phase's metrics windows)",
            "python -m bench peers --job bench/workloads/tabular_mlp.yaml --seeds S --variants "
            "mwms,single,bsp,default,switched --target 0.9 --allocator tcmalloc --add-to F --out F --runs-dir D (one "
            "seed per quiet call, D a folder of the seed's own; the fc-v595 host; 4ae9309, the peers building the "
            "script's model_fn; seed 5 at 946182c, whose change is the search's alone)",
            "python -m bench peers --job bench/workloads/residual_mlp.yaml --seeds S --variants "
            "mwms,single,bsp,default --target 0.85 --allocator tcmalloc --add-to F --out F --runs-dir D (one seed per "
            "quiet call, D a folder of the seed's own; the fc-v595 host; 5505da7)",
            "python -m bench peers --job bench/workloads/plain_cnn1d.yaml --seeds S --variants "
            "mwms,single,bsp,default --target 0.95 --allocator tcmalloc --add-to F --out F --runs-dir D (one seed per "
            "quiet call, D a folder of the seed's own; the fc-v595 host; 703e890)"),
           lambda docs: peers_render(docs, PEERS_FILES), headline=peers_headline, note=PEERS_NOTE),
    Figure("compression", "All-reduce compression: BSP in 16-bit floats against MWMS",
           COMPRESSION_FILES,
           ("python -m bench peers --job jobs/resnet_synthetic.yaml --seeds S --variants "
            "mwms,bsp,bsp+fp16,bsp+bf16,default+fp16,switched+fp16 --target 0.9 --allocator tcmalloc "
            "--loopback-mbit 50 --add-to F --out F --runs-dir D (one seed per quiet call, D a folder of the seed's "
            "own; the fc-v595 host)",
            "python -m bench peers --job jobs/resnet_synthetic.yaml --seeds S --variants mwms,bsp,bsp+fp16,bsp+bf16 "
            "--target 0.9 --allocator tcmalloc --add-to F --out F --runs-dir D (one seed per quiet call; the fc-v595 "
            "host)",
            "python -m bench peers --job jobs/mnist1d_cnn.yaml --seeds S --variants "
            "mwms,bsp,bsp+fp16,bsp+bf16,default,default+bf16 --target 0.95 --allocator tcmalloc --add-to F --out F "
            "--runs-dir D (one seed per quiet call; the fc-v595 host)",
            "python -m bench peers --job jobs/resnet_synthetic.yaml --seeds S --variants mwms,switched,switched+bf16 "
            "--target 0.9 --allocator tcmalloc --loopback-mbit 50 --add-to F --out F --runs-dir D (one seed per quiet "
            "call; the fc-v595 host; at 2072715, whose guard change 652f473 reverted: the reverted code's replay "
            "gives every run's verdict where it was)"),
           compression_render, headline=compression_headline, note=COMPRESSION_NOTE),
)
