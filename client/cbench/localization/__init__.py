"""The causal-variable track: where does a cbench model hold each variable of its program?

* :mod:`cbench.localization.variables` -- variables, candidate locations, the aligned (true)
  location and the counterfactual data with interchange labels;
* :mod:`cbench.localization.featurizers` -- identity, DAS, PCA and random-rotation featurizers
  (pyvene interventions, through :mod:`cbench.localization.pyvene_adapter`);
* :mod:`cbench.localization.localize` -- IIA per location and the localization scores;
* :mod:`cbench.localization.track` -- ``cbench bench --track causal-variables``: every variable
  of every case, each featurizer, SIIT and Tracr models; a table and a plot.

May import: ``cbench.scoring``, ``cbench.runtime``, ``cbench.tasks`` and everything below them.
"""
