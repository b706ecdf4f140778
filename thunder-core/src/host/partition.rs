//! Claiming: executors in priority order claim regions of the trace; the host validates every
//! claim; unclaimed composites are decomposed into their subsymbols and everyone is asked
//! again from scratch, until no composite is left unclaimed. The last round's claims are the
//! partition, so fusers see the fully decomposed trace and can claim large regions.

use super::view::{op_view, value_metas};
use super::PluginHost;
use crate::error::{Error, Result};
use crate::ir::{BoundSymbol, Trace, Value};
use crate::text::print::bsym_line;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::sync::Arc;
use thunder_abi::{ExecutorBox, RegionSpec, TraceView};

/// The executors a trace is partitioned among, in the host's priority order, indexed as
/// [`PluginHost::entries`] (an inactive executor keeps its seat, empty). It holds shared
/// handles, so a compiled program can partition its trace again without the host (to re-run
/// without an executor whose `run` failed).
#[derive(Clone)]
pub struct Lineup {
    seats: Vec<Seat>,
    /// Whether programs compiled from this lineup replay as CUDA graphs.
    pub(crate) cuda_graphs: bool,
}

#[derive(Clone)]
struct Seat {
    name: String,
    /// `None` when the executor is not active (disabled, unavailable, failed to create).
    executor: Option<Arc<ExecutorBox>>,
    run_fallback: bool,
    /// Symbols it is never asked to claim: shown to it as claimed already.
    skip: Vec<String>,
}

impl Lineup {
    pub fn of(host: &PluginHost) -> Lineup {
        Lineup {
            seats: host
                .entries
                .iter()
                .map(|e| Seat {
                    name: e.name.clone(),
                    executor: e.executor.clone().filter(|_| e.is_active()),
                    run_fallback: e.run_fallback,
                    skip: e.skip.clone(),
                })
                .collect(),
            cuda_graphs: host.cuda_graphs(),
        }
    }

    /// The name of executor `i`.
    pub fn name(&self, i: usize) -> &str {
        self.seats.get(i).map_or("<unknown executor>", |s| &s.name)
    }

    /// Whether executor `i`'s run failures may be re-run on the next executors.
    pub fn run_fallback(&self, i: usize) -> bool {
        self.seats.get(i).is_some_and(|s| s.run_fallback)
    }

    pub(crate) fn executor(&self, i: usize) -> Option<&ExecutorBox> {
        self.seats.get(i).and_then(|s| s.executor.as_deref())
    }
}

/// A validated region: ops (indices into [`Partition::bsyms`], in trace order), the values it
/// reads from outside and the values it writes that others need.
#[derive(Debug, Clone, PartialEq)]
pub struct Region {
    pub executor: usize,
    pub ops: Vec<usize>,
    pub inputs: Vec<Value>,
    pub outputs: Vec<Value>,
}

impl Region {
    pub fn spec(&self) -> RegionSpec {
        RegionSpec {
            ops: self.ops.iter().map(|&i| i as u32).collect(),
            inputs: self.inputs.iter().map(|v| v.0).collect(),
            outputs: self.outputs.iter().map(|v| v.0).collect(),
        }
    }
}

/// A claim the host refused, with the reason (shown by `examine`, logged, and noted in the
/// execution trace).
#[derive(Debug, Clone, PartialEq)]
pub struct Rejection {
    pub executor: String,
    /// The claimed op indices as the executor gave them; empty when `claim` itself failed.
    pub ops: Vec<u32>,
    pub reason: String,
}

pub struct Partition {
    /// The trace's bound symbols after the decompositions claiming needed.
    pub bsyms: Vec<BoundSymbol>,
    /// The view the final claims were made on (compile sees the same one).
    pub view: TraceView,
    /// In an order that respects dependencies.
    pub regions: Vec<Region>,
    pub rejections: Vec<Rejection>,
}

/// Why a claim is invalid, or `None` if it may be accepted. `claimed_by` describes the owner
/// of an earlier claim (by claim number) for the message.
fn check_claim(
    ops: &[u32],
    owner: &[Option<usize>],
    bsyms: &[BoundSymbol],
    claimed_by: impl Fn(usize) -> String,
) -> Option<String> {
    if ops.is_empty() {
        return Some("empty region".into());
    }
    let mut seen = HashSet::new();
    for &i in ops {
        let Some(slot) = owner.get(i as usize) else {
            return Some(format!(
                "op index {i} is out of range (the trace has {} ops)",
                owner.len()
            ));
        };
        if !seen.insert(i) {
            return Some(format!("op {i} is listed twice"));
        }
        if let Some(claim) = slot {
            return Some(format!(
                "op {i} ({}) is already claimed by {}",
                bsyms[i as usize].sym.id,
                claimed_by(*claim)
            ));
        }
    }
    let members: HashSet<usize> = ops.iter().map(|&i| i as usize).collect();
    non_convex(&members, bsyms)
}

/// A region is convex when no path leaves it and comes back. Walking the ops between its
/// first and last member in trace order, an outside op that depends on the region taints its
/// outputs; a member that reads a tainted value closes such a path.
fn non_convex(members: &HashSet<usize>, bsyms: &[BoundSymbol]) -> Option<String> {
    let lo = *members.iter().min()?;
    let hi = *members.iter().max()?;
    let mut produced: HashSet<Value> = HashSet::new();
    let mut tainted: HashSet<Value> = HashSet::new();
    for (i, b) in bsyms.iter().enumerate().take(hi + 1).skip(lo) {
        let reads_region = b
            .input_values()
            .any(|v| produced.contains(&v) || tainted.contains(&v));
        if members.contains(&i) {
            if b.input_values().any(|v| tainted.contains(&v)) {
                return Some(format!(
                    "not convex: op {i} ({}) depends on the region through ops outside it",
                    b.sym.id
                ));
            }
            produced.extend(b.outputs.iter().copied());
        } else if reads_region {
            tainted.extend(b.outputs.iter().copied());
        }
    }
    None
}

fn decompose_unclaimed(bsyms: &[BoundSymbol], owner: &[Option<usize>]) -> Option<Vec<BoundSymbol>> {
    let mut changed = false;
    let mut out = Vec::with_capacity(bsyms.len());
    for (b, o) in bsyms.iter().zip(owner) {
        if o.is_none() && b.sym.is_composite() {
            out.extend(b.subsymbols.iter().cloned());
            changed = true;
        } else {
            out.push(b.clone());
        }
    }
    changed.then_some(out)
}

fn region_io(
    bsyms: &[BoundSymbol],
    ops: &[usize],
    readers: &ReaderClaims,
    me: usize,
) -> (Vec<Value>, Vec<Value>) {
    let mut produced_here = HashSet::new();
    let mut inputs = Vec::new();
    for &i in ops {
        for v in bsyms[i].input_values() {
            if !produced_here.contains(&v) && !inputs.contains(&v) {
                inputs.push(v);
            }
        }
        produced_here.extend(bsyms[i].outputs.iter().copied());
    }
    let outputs = ops
        .iter()
        .flat_map(|&i| bsyms[i].outputs.iter().copied())
        .filter(|&v| readers.needed_outside(v, me))
        .collect();
    (inputs, outputs)
}

/// Which claims read each value, found in one pass over the trace: a region's outputs are the
/// values it writes that the trace returns or another claim reads (asked once per region, a
/// scan of the whole trace per region cost a GPT-2 backward tens of milliseconds).
struct ReaderClaims {
    returned: HashSet<Value>,
    /// The one claim reading the value, or `None` when several do.
    only_reader: HashMap<Value, Option<usize>>,
}

impl ReaderClaims {
    fn of(trace: &Trace, bsyms: &[BoundSymbol], owner: &[Option<usize>]) -> ReaderClaims {
        let mut only_reader: HashMap<Value, Option<usize>> = HashMap::new();
        for (b, o) in bsyms.iter().zip(owner) {
            // Every op is owned by now (partitioning failed otherwise); an unowned reader
            // counts as a claim of its own.
            let claim = o.unwrap_or(usize::MAX);
            for v in b.input_values() {
                only_reader
                    .entry(v)
                    .and_modify(|r| {
                        if *r != Some(claim) {
                            *r = None;
                        }
                    })
                    .or_insert(Some(claim));
            }
        }
        ReaderClaims {
            returned: trace.outputs.iter().copied().collect(),
            only_reader,
        }
    }

    /// Whether `v`, written by claim `me`, is returned or read by another claim.
    fn needed_outside(&self, v: Value, me: usize) -> bool {
        self.returned.contains(&v)
            || match self.only_reader.get(&v) {
                Some(Some(claim)) => *claim != me,
                Some(None) => true,
                None => false,
            }
    }
}

/// Orders regions so each runs after the regions whose outputs it reads; ties go to the
/// region whose first op comes first.
fn order_regions(regions: Vec<Region>) -> Result<Vec<Region>> {
    let producer: HashMap<Value, usize> = regions
        .iter()
        .enumerate()
        .flat_map(|(r, reg)| reg.outputs.iter().map(move |&v| (v, r)))
        .collect();
    let mut indegree = vec![0usize; regions.len()];
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); regions.len()];
    for (r, reg) in regions.iter().enumerate() {
        let deps: HashSet<usize> = reg
            .inputs
            .iter()
            .filter_map(|v| producer.get(v).copied())
            .filter(|&p| p != r)
            .collect();
        indegree[r] = deps.len();
        for p in deps {
            users[p].push(r);
        }
    }
    let first_op = |r: usize| std::cmp::Reverse(regions[r].ops[0]);
    let mut ready: BinaryHeap<(std::cmp::Reverse<usize>, usize)> = (0..regions.len())
        .filter(|&r| indegree[r] == 0)
        .map(|r| (first_op(r), r))
        .collect();
    let mut order = Vec::with_capacity(regions.len());
    while let Some((_, r)) = ready.pop() {
        order.push(r);
        for &u in &users[r] {
            indegree[u] -= 1;
            if indegree[u] == 0 {
                ready.push((first_op(u), u));
            }
        }
    }
    if order.len() != regions.len() {
        return Err(Error::Bug("regions depend on each other in a cycle".into()));
    }
    let mut slots: Vec<Option<Region>> = regions.into_iter().map(Some).collect();
    Ok(order.into_iter().filter_map(|r| slots[r].take()).collect())
}

/// Partitions `trace` among the host's active executors, skipping those in `excluded`.
pub fn partition(host: &PluginHost, trace: &Trace, excluded: &HashSet<usize>) -> Result<Partition> {
    partition_among(&Lineup::of(host), trace, excluded)
}

/// Partitions `trace` among the active executors of `lineup`, skipping those in `excluded`.
pub fn partition_among(
    lineup: &Lineup,
    trace: &Trace,
    excluded: &HashSet<usize>,
) -> Result<Partition> {
    let mut bsyms = trace.bsyms.clone();
    let values = value_metas(trace);
    let mut rejections = Vec::new();
    loop {
        let mut view = TraceView {
            values: values.clone(),
            ops: bsyms.iter().map(op_view).collect(),
            inputs: trace.inputs.iter().map(|v| v.0).collect(),
            outputs: trace.outputs.iter().map(|v| v.0).collect(),
        };
        let mut owner: Vec<Option<usize>> = vec![None; bsyms.len()];
        let mut claims: Vec<(usize, Vec<usize>)> = Vec::new();
        for (ei, seat) in lineup.seats.iter().enumerate() {
            let Some(exec) = seat.executor.as_deref().filter(|_| !excluded.contains(&ei)) else {
                continue;
            };
            for (op, o) in view.ops.iter_mut().zip(&owner) {
                op.claimed = o.is_some() || seat.skip.iter().any(|s| s == op.symbol.as_str());
            }
            let claimed = match exec.claim(&view).into_result() {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(executor = %seat.name, "claim failed: {e}");
                    rejections.push(Rejection {
                        executor: seat.name.clone(),
                        ops: Vec::new(),
                        reason: format!("claim failed: {e}"),
                    });
                    continue;
                }
            };
            for claim in claimed {
                let claimed_by = |c: usize| {
                    let (owner_exec, _) = &claims[c];
                    if *owner_exec == ei {
                        format!("another region of `{}`: regions may not overlap", seat.name)
                    } else {
                        format!("`{}`", lineup.name(*owner_exec))
                    }
                };
                let skipped = claim.ops.iter().find_map(|&i| {
                    let id = &bsyms.get(i as usize)?.sym.id;
                    seat.skip.iter().any(|s| s == id).then(|| {
                        format!("op {i} ({id}) is in the executor's `skip` list (plugins.toml)")
                    })
                });
                if let Some(reason) =
                    skipped.or_else(|| check_claim(&claim.ops, &owner, &bsyms, claimed_by))
                {
                    tracing::warn!(executor = %seat.name, ops = ?claim.ops, "claim rejected: {reason}");
                    rejections.push(Rejection {
                        executor: seat.name.clone(),
                        ops: claim.ops.to_vec(),
                        reason,
                    });
                    continue;
                }
                let mut ops: Vec<usize> = claim.ops.iter().map(|&i| i as usize).collect();
                ops.sort_unstable();
                // Ownership is by claim, not executor: two regions of one executor are distinct.
                for &i in &ops {
                    owner[i] = Some(claims.len());
                }
                claims.push((ei, ops));
            }
        }
        if let Some(next) = decompose_unclaimed(&bsyms, &owner) {
            bsyms = next;
            continue;
        }
        let unclaimed: Vec<String> = bsyms
            .iter()
            .zip(&owner)
            .filter(|(_, o)| o.is_none())
            .map(|(b, _)| format!("{} (`{}`)", b.sym.id, bsym_line(trace, b)))
            .collect();
        if !unclaimed.is_empty() {
            return Err(Error::Unclaimed {
                ops: unclaimed.join("; "),
            });
        }
        for (op, o) in view.ops.iter_mut().zip(&owner) {
            op.claimed = o.is_some();
        }
        let readers = ReaderClaims::of(trace, &bsyms, &owner);
        let regions = claims
            .into_iter()
            .enumerate()
            .map(|(claim, (executor, ops))| {
                let (inputs, outputs) = region_io(&bsyms, &ops, &readers, claim);
                Region {
                    executor,
                    ops,
                    inputs,
                    outputs,
                }
            })
            .collect();
        let regions = order_regions(regions)?;
        return Ok(Partition {
            bsyms,
            view,
            regions,
            rejections,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::parse_trace;

    /// a -> b -> c -> d in a chain, plus e reading a.
    fn chain() -> Vec<BoundSymbol> {
        let t = parse_trace(
            "def computation(x):\n  # x: \"cpu f32[2]\"\n  a = prims.exp(x)\n  b = prims.neg(a)\n  c = prims.abs(b)\n  d = prims.add(a, c)\n  e = prims.sin(a)\n  return (d, e)\n",
        )
        .unwrap();
        t.bsyms
    }

    fn by(claim: usize) -> String {
        format!("claim {claim}")
    }

    #[test]
    fn valid_claims_pass() {
        let b = chain();
        assert_eq!(check_claim(&[0, 1, 2, 3], &[None; 5], &b, by), None);
        assert_eq!(check_claim(&[4], &[None; 5], &b, by), None);
        // Not contiguous in trace order but convex: e (4) only reads a (0).
        assert_eq!(check_claim(&[0, 4], &[None; 5], &b, by), None);
    }

    #[test]
    fn invalid_claims_are_refused_with_a_reason() {
        let b = chain();
        let free = [None; 5];
        assert!(check_claim(&[], &free, &b, by).unwrap().contains("empty"));
        assert!(check_claim(&[9], &free, &b, by)
            .unwrap()
            .contains("out of range"));
        assert!(check_claim(&[1, 1], &free, &b, by)
            .unwrap()
            .contains("listed twice"));
        let owned = [None, Some(0), None, None, None];
        assert_eq!(
            check_claim(&[1], &owned, &b, by).unwrap(),
            "op 1 (prims.neg) is already claimed by claim 0"
        );
        // a and d without b and c: the path a -> b -> c -> d leaves the region and comes back.
        let reason = check_claim(&[0, 3], &free, &b, by).unwrap();
        assert!(
            reason.contains("not convex") && reason.contains("prims.add"),
            "{reason}"
        );
    }
}
