"""Example discovery methods of a package outside cbench."""

import torch


def edge_gradient(ctx, scale=1.0):
    """Edge attribution by the gradient of the loss with respect to every edge's mask."""
    grad, _loss = ctx.runtime.edge_mask_gradient(ctx.data.base, ctx.metric, source=ctx.data.source,
                                                 ablated=ctx.ablated)
    return -scale * grad  # the loss increase when an edge is ablated, to first order


edge_gradient.params = {"scale": 1.0}
edge_gradient.metrics = ("ce", "mae")  # as EAP's: the gradient of KL vanishes at the clean model


class SourceNorm:
    """Scores each edge by the mean size of its source node's clean output (a node-level baseline)."""

    ablates = False

    def __call__(self, ctx):
        size = ctx.clean_acts.norm(dim=-1).mean(dim=(1, 2))  # one value per node, graph.forward_nodes order
        by_node = dict(zip(ctx.graph.forward_nodes, size.tolist()))
        return {e.name: by_node[e.src] for e in ctx.graph.edges}


__all__ = ["SourceNorm", "edge_gradient", "torch"]
