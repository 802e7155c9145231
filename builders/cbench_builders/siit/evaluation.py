"""SIIT's validation metrics, per labelled position, on fixed (base, source) pairs:

* accuracy -- low-level output on b equals the high-level output on b;
* IIA -- averaged over high-level nodes V: IntInv(L, b, s, Π(V)) equals IntInv(H, b, s, V);
* SIIA -- averaged over non-aligned low-level nodes V: IntInv(L, b, s, V) equals H(b);
* with edge strictness, edge SIIA -- the edges outside the ground truth resample-ablated at once,
  and each ground-truth edge the program ignores on its own, leave the outputs as they are.

Every intervention of a batch is tiled into one forward pass.
"""

from __future__ import annotations


import numpy as np
import torch


class Evaluation:
    """Validation pairs and metrics of :class:`cbench_builders.siit.trainer.SIITTrainer` (a mixin:
    it uses the trainer's models, masks, :class:`~cbench_builders.siit.losses.Losses` and
    :class:`~cbench_builders.siit.interventions.Interventions`)."""

    @staticmethod
    def eval_pairs(inputs: dict[int, torch.Tensor], n: int, seed: int,
                   sources: dict[int, torch.Tensor] | None = None,
                   weighting: str = "equal") -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Fixed (base, source) pairs for validation: ``n`` in total, lengths weighted as the
        training config says (:func:`~cbench_builders.siit.data.length_counts`; equally by default)
        (with ``sources``: base ``i`` with ``sources[L][i]``)."""
        from cbench_builders.siit.data import length_counts

        gen = torch.Generator().manual_seed(seed)
        out = []
        for L, per_len in length_counts(inputs, n, weighting).items():
            x = inputs[L]
            bi = torch.randint(len(x), (per_len,), generator=gen)
            si = torch.randint(len(x), (per_len,), generator=gen)
            out.append((x[bi], x[si]) if sources is None else (x[bi], sources[L][bi]))
        return out

    @torch.no_grad()
    def evaluate(self, inputs: dict[int, torch.Tensor] | torch.Tensor, n_pairs: int | None = None,
                 seed: int = 0) -> dict:
        """Accuracy, IIA and SIIA on (base, source) pairs drawn from ``inputs``."""
        if isinstance(inputs, torch.Tensor):
            inputs = {inputs.shape[1] - 1: inputs}
        return self.evaluate_pairs(self.eval_pairs(inputs, n_pairs or self.cfg.eval_pairs, seed))

    @torch.no_grad()
    def evaluate_pairs(self, pairs, chunk: int = 16_384) -> dict:
        """Accuracy, IIA, SIIA (and per node) on the given pairs: every intervention of a batch
        tiled into one forward pass (chunked to bound memory)."""
        self.ll.eval()
        n_hl, n_na = len(self.hl_nodes), len(self.non_aligned)
        agree_acc, agree_iia, agree_siia, count = 0.0, np.zeros(n_hl), np.zeros(n_na), 0
        agree_edge, agree_inv, agree_edge_iia = 0.0, 0.0, 0.0
        for base, source in pairs:
            B = len(base)
            y_b = self._target(self.hl_f(base), base)
            clean = self.ll_f(base)
            agree_acc += self._agree(clean, y_b) * B
            hl_src, ll_src = self.hl_f.acts(source), self.ll_f.acts(source)
            if self.cfg.edge_strict:  # every edge outside the ground truth resample-ablated at once:
                # the outputs must match the labels and the unablated outputs (what the release gate
                # compares: numerical outputs within atol of both can still be 2 atol apart)
                ablated = self._edge_run(base, source, self._complement_keep(B), ll_src)
                same = self._same(ablated, clean) if self.objective is None else 1.0
                agree_edge += min(self._agree(ablated, y_b), same) * B
                # ... and so must the outputs with one ignored edge ablated (with an objective, e.g.
                # IOI's: its own agreement with the labels; it counted 0 before, so the stop rule
                # could never hold)
                outs = (self._edge_run(base, source, keep, ll_src) for keep in self._invariant_keeps(B))
                held = [self._same(o, clean) if self.objective is None else self._agree(o, y_b) for o in outs]
                agree_inv += min(held, default=1.0) * B
            if self.cfg.edge_strict and self.cfg.edge_iit > 0:  # each circuit edge ablated alone, both models
                hl_rt, (ll_idx, hl_idx) = self._edge_iit_setup()
                n_e = len(ll_idx)
                if n_e:
                    idx = torch.arange(B).repeat(n_e)
                    keep = torch.ones(n_e * B, self.runtime.n_edges)
                    hl_keep = torch.ones(n_e * B, hl_rt.n_edges)
                    rows = torch.arange(n_e).repeat_interleave(B)
                    keep[torch.arange(n_e * B), ll_idx[rows]] = 0.0
                    hl_keep[torch.arange(n_e * B), hl_idx[rows]] = 0.0
                    tiled, tiled_src = base[idx], source[idx]
                    y_e = self._target(hl_rt.run(tiled, source=tiled_src, edge_mask=hl_keep,
                                                 ablation="resample").output, tiled)
                    agree_edge_iia += self._agree(self._edge_run(tiled, tiled_src, keep, ll_src.index(idx)), y_e) * B
                else:
                    agree_edge_iia += B
            # rows: hl node j for j < n_hl, then non-aligned node k
            per = max(1, chunk // B)
            rows = list(range(n_hl + n_na))
            for s in range(0, len(rows), per):
                group = rows[s:s + per]
                G = len(group)
                idx = torch.arange(B).repeat(G)
                tokens = base.repeat(G, 1)
                ll_mask = torch.zeros(G * B, len(self.ll_f.names), dtype=torch.bool)
                hl_group = [r for r in group if r < n_hl]
                for g, r in enumerate(group):
                    if r < n_hl:
                        ll_mask[g * B:(g + 1) * B] = self.align[r]
                    else:
                        ll_mask[g * B:(g + 1) * B, self.na_cols[r - n_hl]] = True
                out = self.ll_f(tokens, ll_src.index(idx), ll_mask)
                if hl_group:
                    Gh = len(hl_group)
                    hl_mask = torch.zeros(Gh * B, len(self.hl_f.names), dtype=torch.bool)
                    for g, r in enumerate(hl_group):
                        hl_mask[g * B:(g + 1) * B, self.hl_cols[r]] = True
                    tiled = base.repeat(Gh, 1)
                    y_iit = self._target(self.hl_f(tiled, hl_src.index(torch.arange(B).repeat(Gh)), hl_mask), tiled)
                for g, r in enumerate(group):
                    o = out[g * B:(g + 1) * B]
                    if r < n_hl:
                        gi = hl_group.index(r)
                        agree_iia[r] += self._agree(o, y_iit[gi * B:(gi + 1) * B]) * B
                    else:
                        agree_siia[r - n_hl] += self._agree(o, y_b) * B
            count += B
        iia_nodes = agree_iia / count
        siia_nodes = agree_siia / count
        return {"accuracy": agree_acc / count,
                # the edge stopping metric: the worse of the complement ablated at once and the
                # ignored ground-truth edges ablated one at a time
                "edge_siia": min(agree_edge, agree_inv) / count if self.cfg.edge_strict else 1.0,
                "invariant_edge_same": agree_inv / count if self.cfg.edge_strict else 1.0,
                # edge-level IIA: each circuit edge ablated alone in both models, the outputs agree
                "edge_iia": agree_edge_iia / count if self.cfg.edge_strict and self.cfg.edge_iit > 0 else 1.0,
                "iia": float(iia_nodes.mean()) if n_hl else 1.0,
                "siia": float(siia_nodes.mean()) if n_na else 1.0,
                "min_siia_node": float(siia_nodes.min()) if n_na else 1.0,
                "per_node": {"iia": dict(zip(self.hl_nodes, map(float, iia_nodes))),
                             "siia": dict(zip(self.non_aligned, map(float, siia_nodes)))}}
