"""Cost model of one training step, fitted per strategy on a sweep, validated on held-out points.

Symbols: N workers, k parameter servers, S = gradient_bytes * 8 (bits), B = the path bandwidth
*as the checks measured it* (the narrowest iperf3 goodput of the run, bit/s; a run without
checks: configured x rho, rho = the median measured/configured ratio of the fitted results, 0.956
by default), r = the ping RTT (s), P = cores of the machine the tasks share, u = cores a lone
worker keeps busy (usage.csv of the 1-worker runs), steps = steps of the run.

Compute. Every worker wants u cores; host i may use at most cpu_i * P (topology.host cpu, a
fraction of the whole machine). On one machine the P cores are shared max-min fairly among the
workers (water-filling), so worker i gets a_i cores and computes ``s_i = u / a_i`` times slower
than a lone worker (s_i >= 1). A synchronous step waits for the slowest worker: s = max_i s_i.
On separate machines (``shared=False``, predictions) a_i = min(u, cpu_i * P). Runs with compute
"budgets" (runs.csv ``compute``: every node held to its ``cores`` by cgroups) are separate
machines too: a_i = min(u, cores_i), so their compute term is constant per node and does not grow
with the number of nodes.

Steady step t (runs.csv ``steady_step_s``: the median step of the lead task after its warm-up, under
ps the mean interval; analysis/tables/steady.py):

* all-reduce (ring: reduce-scatter + all-gather, 2(N-1) rounds of S/N each)::

      t = c*s + gamma * 2(N-1)/N * S/(B/m) + 2(N-1) * (alpha + r/2)

  m: the ring's link sharing (ring_share: the most ring hops one link carries one way in the
  run's topology; 1 on a star, and for ps and predictions without a topology)

* parameter server (TF2, asynchronous: a coordinator step is one worker's closure, which pulls
  the S bits of parameters and pushes S bits of gradients; the busiest server link carries S/k'
  of every closure each way, k' = the servers the largest variable is sharded over)::

      tau_j = c*s_j + gamma * 2*S/B + 2*alpha + r        one closure on worker j
      A     = 1 / sum_j(1/tau_j)                         workers in parallel
      C     = gamma * S/(k'*B)                           the busiest server link
      t     = (A^p + C^p + d^p)^(1/p)                    three stages in a pipeline; d = the
                                                         coordinator's own time per step

Warm-up E (runs.csv ``warmup_s``, measured directly: the time of the warm-up steps, the first step
tracing the function and setting up the collective, and the steps after it still over twice the
typical one)::

      E = w*s + v*(N-1) + beta*S/(B/m)        (S/B only where there is traffic: not 1-worker all-reduce)

E is the warm-up steps' own time, not ``training_time - steps x t``: that difference also holds
the steady steps' spread around their median (their mean is above it when a few steps are slow,
and that excess grows with the steps, not once per run) and the time between steps; the spread
is the steady state's (its quartiles), and the time between steps is a few hundredths of a second.

Samples per step: the global batch (batch x N) under all-reduce and ddp, one worker's batch under
ps (a coordinator step is one closure). The steady samples/s is samples per step / t; the speedup
of N nodes is their steady samples/s over one node's (one worker, same engine, model, batch per
worker, bandwidth); a job of S samples takes E + S / (steady samples/s) (``CostModel.rates``).

c is scaled by S x batch per worker relative to the fitted runs' (compute grows with the
parameters times the samples), so a prediction for another size of model scales. The parameters
(c, gamma, alpha, w, v, beta; ps also d, p) are fitted per strategy by Levenberg-Marquardt on
log(predicted/measured) of the steady steps and warm-ups, with a soft-L1 loss (a noisy run counts
less) and a weak pull towards rough defaults, so a parameter the data cannot identify keeps its
default (listed as such). Only runs whose steady state was judged (runs.csv ``steady`` ok: at
least 10 steady steps) are fitted; the others are listed apart (``evaluate``'s ``not_judged``,
``fit_notes``). Accuracy (``comparison``, ``holdout``, ``accuracy``, ``repeat_floor``) is the
relative error of the steady step. ``holdout`` fits on the points with fewer workers and predicts
the largest worker count. Degraded runs (runs.csv ``fidelity`` "degraded: ...") are left out of
every fit unless ``include_degraded``; ``evaluate`` predicts them apart (split "degraded, not
fitted").
"""
from analysis.model.costmodel.formulas import *  # noqa: F401,F403
from analysis.model.costmodel.run_features import *  # noqa: F401,F403
from analysis.model.costmodel.fit import *  # noqa: F401,F403
from analysis.model.costmodel.evaluation import *  # noqa: F401,F403
from analysis.model.costmodel.formulas import _family  # noqa: F401  (the fit a run belongs to)
