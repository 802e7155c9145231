"""The interventions of SIIT's steps: which nodes or edges each example of a batch interchanges.

* IIT: example ``b`` interchanges high-level node ``j[b]`` and its low-level image (:meth:`Interventions._hl_masks`);
* node strictness: one non-aligned low-level node per example (Algorithm 1), or each with
  probability ``strict_prob`` (summed) (:meth:`Interventions._strict_mask`);
* edge strictness (zoo v2): resample ablations of the edges outside the ground truth, run on the
  low-level model as a graph runtime (:meth:`Interventions._edge_masks`, :meth:`Interventions._edge_run`),
  including the ground-truth edges the program itself ignores (:func:`invariant_edges`).
"""

from __future__ import annotations

import torch

from cbench.tasks.labels import high_level_classes


def invariant_edges(hl_model, edges: list[str], inputs: dict[int, torch.Tensor], task_type: str,
                    n_pairs: int = 512, seed: int = 0) -> list[str]:
    """The ground-truth edges of the high-level model whose resample ablation alone never changes
    its output on (base, source) pairs of one length, as SIIT trains on: typically a Select's
    query or key reading only position, which base and source share. SIIT's edge strictness
    resample-ablates these too, so the low-level model is as invariant to them as the program is
    (they stay in the ground truth: zero ablation still matters; ``cbench verify`` marks them
    ``"signal": false``). Checked exactly on up to ``n_pairs`` pairs per length."""
    from cbench.runtime import as_runtime, edge_names_to_mask

    if not edges:
        return []
    rt = as_runtime(hl_model)
    gen = torch.Generator().manual_seed(seed)
    masks = torch.ones(len(edges), rt.n_edges, dtype=rt.dtype)
    for i, e in enumerate(edges):
        masks[i] = torch.as_tensor(~edge_names_to_mask(rt.graph, [e]), dtype=rt.dtype)
    moved = torch.zeros(len(edges), dtype=torch.bool)
    with torch.no_grad():
        for L, x in sorted(inputs.items()):
            n = min(n_pairs, len(x))
            base = x[torch.randint(len(x), (n,), generator=gen)]
            source = x[torch.randint(len(x), (n,), generator=gen)]
            clean = rt.clean(base)
            outs = rt.run_masks(base, masks, source=source)  # [E, B, P, V]
            if task_type == "numerical":
                diff = (outs[..., 1:, 0] - clean[None, :, 1:, 0]).abs() > 1e-4
            else:
                diff = high_level_classes(outs[..., 1:, :]) != high_level_classes(clean[None, :, 1:, :])
            moved |= diff.flatten(1).any(1)
    return [e for e, m in zip(edges, moved.tolist()) if not m]


class Interventions:
    """Intervention masks and edge-ablated runs of :class:`cbench_builders.siit.trainer.SIITTrainer`
    (a mixin: it reads the trainer's ``cfg``, ``ll``, ``hl_f``, ``ll_f``, ``hl_cols``, ``align``,
    ``non_aligned``, ``na_cols``, ``na_colmask``, ``truth_edges``, ``invariant_edges`` and ``_rt``)."""

    def _hl_masks(self, j: torch.Tensor):
        """Masks of a batch whose example b interchanges high-level node j[b] (and its low-level image)."""
        B = len(j)
        hl_mask = torch.zeros(B, len(self.hl_f.names), dtype=torch.bool)
        hl_mask[torch.arange(B), self.hl_cols[j]] = True
        return hl_mask, self.align[j]

    def _iit_masks(self, B: int, gen: torch.Generator):
        """The IIT step's masks (high-level, low-level) of a batch of ``B`` examples: one high-level
        node per example (``iit_sets = "single"``), or (``"mixed"``) for the second half of the
        examples a non-empty Bernoulli(0.5) set of high-level nodes, each with its low-level image."""
        if self.iit_node_p is None:
            j = torch.randint(len(self.hl_nodes), (B,), generator=gen)
        else:  # the config's iit_node_weights
            j = torch.multinomial(self.iit_node_p, B, replacement=True, generator=gen)
        hl_mask, ll_mask = self._hl_masks(j)
        if self.cfg.iit_sets == "single":
            return hl_mask, ll_mask
        n_hl = len(self.hl_nodes)
        sets = torch.rand(B, n_hl, generator=gen) < 0.5
        sets[torch.arange(B), j] = True  # never empty
        use = torch.arange(B) >= B // 2
        sets = torch.where(use[:, None], sets, torch.nn.functional.one_hot(j, n_hl).bool())
        hl_mask = torch.zeros(B, len(self.hl_f.names), dtype=torch.bool)
        hl_mask[:, self.hl_cols] = sets
        ll_mask = (sets.to(torch.float32) @ self.align.to(torch.float32)) > 0
        return hl_mask, ll_mask

    def _strict_mask(self, B: int, gen: torch.Generator) -> torch.Tensor:
        n_ll = len(self.ll_f.names)
        if self.cfg.algorithm == "summed":
            return (torch.rand(B, n_ll, generator=gen) < self.cfg.strict_prob) & self.na_colmask
        mask = torch.zeros(B, n_ll, dtype=torch.bool)
        k = torch.randint(len(self.non_aligned), (B,), generator=gen)
        mask[torch.arange(B), self.na_cols[k]] = True
        return mask

    # -- edge-level strictness
    @property
    def runtime(self):
        """The low-level model as a graph runtime that reads its parameters live (gradients reach them)."""
        if self._rt is None:
            from cbench.runtime import CircuitRuntime, edge_names_to_mask

            self._rt = CircuitRuntime(self.ll, live_weights=True)
            inv = edge_names_to_mask(self._rt.graph, self.invariant_edges)
            truth = edge_names_to_mask(self._rt.graph, self.truth_edges) & ~inv
            self.out_edges = torch.as_tensor((~truth).nonzero()[0], dtype=torch.long)
            # the invariant edges' places among out_edges (mixed-invariant draws its single edges there)
            self.invariant_slots = torch.as_tensor(inv[self.out_edges.numpy()].nonzero()[0], dtype=torch.long)
            self.invariant_slot_p = self._invariant_slot_weights()
        return self._rt

    def _invariant_slot_weights(self) -> torch.Tensor | None:
        """The config's ``invariant_edge_weights`` over ``invariant_slots`` (None: a uniform draw)."""
        weights = self.cfg.invariant_edge_weights or {}
        if not weights:
            return None
        from cbench.runtime import edge_names_to_mask

        cols = self.out_edges[self.invariant_slots].numpy()  # each slot's edge
        p = torch.ones(len(cols), dtype=torch.float64)
        for edge, w in weights.items():
            p[torch.as_tensor(edge_names_to_mask(self._rt.graph, [edge])[cols])] = w
        return p

    def _edge_masks(self, B: int, gen: torch.Generator) -> torch.Tensor:
        """``[B, n_edges]`` keep-masks (1 keep, 0 resample-ablate) over the edges outside the ground truth.

        ``mixed`` (default): a third of the examples ablate one random such edge, a third each such
        edge with probability p ~ U(0, 1) (p drawn per example), a third all of them. Ablating only
        large random sets lets edges cancel each other (the complement is harmless together while
        single edges keep 19-22 % effects in a feasibility run); single edges and all edges cover
        both ends. ``mixed-invariant``: as ``mixed``, but half of the single-edge examples ablate one
        of the ground-truth edges the program ignores (what the marked-edge release gate ablates
        alone; among hundreds of edges a uniform draw reaches one of them almost never), drawn with
        the config's ``invariant_edge_weights``.
        ``bernoulli``: each such edge with probability ``strict_prob``."""
        rt = self.runtime
        n_out = len(self.out_edges)
        keep = torch.ones(B, rt.n_edges)
        if n_out == 0:
            return keep
        if self.cfg.edge_sampling == "bernoulli":
            ablate = torch.rand(B, n_out, generator=gen) < self.cfg.strict_prob
        else:
            mode = torch.randint(3, (B, 1), generator=gen)
            single = torch.zeros(B, n_out, dtype=torch.bool)
            pick = torch.randint(n_out, (B,), generator=gen)
            if self.cfg.edge_sampling == "mixed-invariant" and len(self.invariant_slots):
                draw = (torch.randint(len(self.invariant_slots), (B,), generator=gen) if self.invariant_slot_p is None
                        else torch.multinomial(self.invariant_slot_p, B, replacement=True, generator=gen))
                inv = self.invariant_slots[draw]
                pick = torch.where(torch.rand(B, generator=gen) < 0.5, inv, pick)
            single[torch.arange(B), pick] = True
            p = torch.rand(B, 1, generator=gen)
            some = torch.rand(B, n_out, generator=gen) < p
            ablate = torch.where(mode == 0, single, torch.where(mode == 1, some, torch.ones_like(single)))
        keep[:, self.out_edges] = (~ablate).to(keep.dtype)
        return keep

    def _edge_run(self, base: torch.Tensor, source: torch.Tensor, keep: torch.Tensor, src_acts=None) -> torch.Tensor:
        """Outputs on ``base`` with the edges where ``keep`` is 0 resample-ablated from ``source``.

        With ``source_gradients`` (and gradients enabled) the source's node outputs keep their
        gradients, as the node interventions' do: an ablated edge then also teaches its source
        node to stop writing what the destination must not read (case 21: an MLP outside the
        path writing the answer straight to the logits), not only the destination to bear it.

        ``edge_sources = "shared"`` (the default): the source's node outputs come from the component
        run on the source (``src_acts``, the :class:`~cbench_builders.siit.interchange.SourceActs`
        the node interventions use, with gradients when they have them; computed here when not
        given); ``"separate"``: from a second source pass through the graph runtime."""
        rt = self.runtime
        if self.cfg.edge_sources == "shared":
            if src_acts is None:
                grads = self.cfg.source_gradients and torch.is_grad_enabled()
                src_acts = self.ll_f(source, collect=True)[1] if grads else self.ll_f.acts(source)
            ablated = self.ll_f.node_outputs(source, src_acts)
            return rt.run(base, edge_mask=keep, ablated=ablated).output
        if self.cfg.source_gradients and torch.is_grad_enabled():
            from cbench.runtime.residual_pass import forward_resid

            ablated = forward_resid(rt, rt.tokens_tensor(source), keep_acts=True).acts
            return rt.run(base, edge_mask=keep, ablated=ablated).output
        return rt.run(base, source=source, edge_mask=keep, ablation="resample").output

    def _edge_iit_setup(self):
        """The circuit edges edge-level IIT ablates (ground truth minus the invariant edges), as
        indices into the low-level and the high-level runtime's edges (through the inverse of the
        correspondence), and the high-level runtime."""
        if getattr(self, "_hl_rt", None) is None:
            from cbench.graph.graph import edge_name, parse_edge_name
            from cbench.runtime import CircuitRuntime

            rt = self.runtime
            self._hl_rt = CircuitRuntime(self.hl)
            back = {ll: hl for hl, ll in self.corr.items()}
            ll_idx, hl_idx = [], []
            for e in sorted(set(self.truth_edges) - set(self.invariant_edges)):
                src, dst, qkv = parse_edge_name(e)
                hl_e = edge_name(back.get(src, src), back.get(dst, dst), qkv)
                if not self._hl_rt.graph.has_edge(hl_e):
                    raise ValueError(f"edge-level IIT: {e} stands for {hl_e}, which the high-level graph lacks")
                ll_idx.append(rt.graph.edge_index(e))
                hl_idx.append(self._hl_rt.graph.edge_index(hl_e))
            self._iit_edges = (torch.tensor(ll_idx, dtype=torch.long), torch.tensor(hl_idx, dtype=torch.long))
        return self._hl_rt, self._iit_edges

    def _edge_iit(self, keep: torch.Tensor, base: torch.Tensor, source: torch.Tensor, gen: torch.Generator):
        """``keep`` (the edge-strictness masks) with a random non-empty set of circuit edges also
        ablated in a share ``edge_iit`` of the examples, and the target of every example: the
        high-level model's output with the same circuit edges resample-ablated (no gradients)."""
        hl_rt, (ll_idx, hl_idx) = self._edge_iit_setup()
        B, n = keep.shape[0], len(ll_idx)
        hl_keep = torch.ones(B, hl_rt.n_edges)
        if n:
            rows = torch.rand(B, generator=gen) < self.cfg.edge_iit
            pick = torch.rand(B, n, generator=gen) < torch.rand(B, 1, generator=gen)
            pick[torch.arange(B), torch.randint(n, (B,), generator=gen)] = True  # never empty
            pick &= rows[:, None]
            keep = keep.clone()
            keep[:, ll_idx] = keep[:, ll_idx] * (~pick).to(keep.dtype)
            hl_keep[:, hl_idx] = (~pick).to(hl_keep.dtype)
        with torch.no_grad():
            out = hl_rt.run(base, source=source, edge_mask=hl_keep, ablation="resample").output
        return keep, self._target(out, base)

    def _complement_keep(self, B: int) -> torch.Tensor:
        keep = torch.ones(B, self.runtime.n_edges)
        keep[:, self.out_edges] = 0.0
        return keep

    def _invariant_keeps(self, B: int) -> list[torch.Tensor]:
        """One keep-mask per ground-truth edge the program ignores, ablating it alone: the release
        gate ``marked_edges_with_signal`` fails a model that uses one of them on its own, even when
        ablating it together with the rest is harmless."""
        from cbench.runtime import edge_names_to_mask

        out = []
        for e in self.invariant_edges:
            keep = torch.ones(B, self.runtime.n_edges)
            keep[:, torch.as_tensor(edge_names_to_mask(self.runtime.graph, [e]))] = 0.0
            out.append(keep)
        return out
