"""The GPU path: a round of updates replayed as one CUDA graph (`graphed`); on the CPU, the round as it is."""

import torch


def graphed(train_round, device):
    """`train_round` as one CUDA graph on a GPU (unchanged on the CPU): small networks at batch 256 are bound by
    the launches of a round's ten thousand or so kernels, not by their arithmetic, and a graph launches them all at
    once. The first round runs op by op on a side stream, which is also the warm-up that capture needs (the
    optimizer's lazy state, cuBLAS's workspaces); the graph is then recorded, which runs nothing, and every later
    round replays it: the same kernels on the same numbers (PyTorch's whole-network capture)."""
    if device.type != "cuda":
        return train_round
    graph, static = torch.cuda.CUDAGraph(), {}

    def replay(batches):
        if not static:
            side_stream = torch.cuda.Stream()
            side_stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side_stream):
                stats = train_round(batches)
            torch.cuda.current_stream().wait_stream(side_stream)
            static["batches"] = [field.clone() for field in batches]  # the graph reads its batches from here
            with torch.cuda.graph(graph):
                static["stats"] = train_round(static["batches"])
            return stats
        for static_field, field in zip(static["batches"], batches, strict=True):
            static_field.copy_(field)
        graph.replay()
        return static["stats"]

    return replay
