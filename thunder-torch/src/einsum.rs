//! Einsum as sums, permutes, reshapes and matmuls (the forms models use: batched products such
//! as `bhid,bhjd->bhij`, transposes, reductions, `...` batch dims), for `ltorch.einsum` and
//! ONNX's Einsum.
//!
//! Operands are contracted left to right. Before each product, labels only one side has and
//! nothing later needs are summed out; the rest are sorted into batch labels (both sides and
//! needed later), kept labels of either side, and contracted labels (both sides, not needed
//! later), so the product is one `[batch, M, K] @ [batch, K, N]` matmul. A last sum and permute
//! give the output's labels in the output's order. A label repeated within one operand (a
//! diagonal) and a label of different sizes in two operands are refused by name.

use crate::CallArgs;
use thunder_core::error::{Error, Result};
use thunder_core::ir::Arg;
use thunder_core::tensor::Tensor;

/// Why an equation cannot be computed: a form not supported (`unsupported`) or a malformed
/// equation for these operands.
#[derive(Debug, Clone, PartialEq)]
pub struct EinsumError {
    pub unsupported: bool,
    pub message: String,
}

impl EinsumError {
    fn invalid(message: impl Into<String>) -> Self {
        EinsumError {
            unsupported: false,
            message: message.into(),
        }
    }

    fn unsupported(message: impl Into<String>) -> Self {
        EinsumError {
            unsupported: true,
            message: message.into(),
        }
    }
}

impl From<Error> for EinsumError {
    fn from(e: Error) -> Self {
        EinsumError::invalid(e.to_string())
    }
}

/// Labels: letters as themselves, the dims `...` stands for as 256 + position.
type Label = u32;

/// One operand's labels, with `...` expanded for an operand of `rank` dims.
fn expand_term(term: &str, rank: Option<usize>) -> std::result::Result<Vec<Label>, String> {
    let letters = term.replace("...", "");
    if let Some(c) = letters.chars().find(|c| !c.is_ascii_alphabetic()) {
        return Err(format!("`{c}` in term `{term}` is not a letter"));
    }
    let named: Vec<Label> = letters.chars().map(|c| c as Label).collect();
    let Some((before, after)) = term.split_once("...") else {
        if let Some(r) = rank {
            if r != named.len() {
                return Err(format!(
                    "term `{term}` has {} labels for an operand of rank {r}",
                    named.len()
                ));
            }
        }
        return Ok(named);
    };
    let r = rank.ok_or_else(|| "`...` in the output needs `...` in an input".to_string())?;
    let n_ellipsis = r.checked_sub(named.len()).ok_or_else(|| {
        format!(
            "term `{term}` has {} labels for an operand of rank {r}",
            named.len()
        )
    })?;
    let mut out: Vec<Label> = before.chars().map(|c| c as Label).collect();
    out.extend((0..n_ellipsis).map(|i| 256 + i as Label));
    out.extend(after.chars().map(|c| c as Label));
    Ok(out)
}

/// An operand and its labels (one per dim).
struct Term {
    t: Tensor,
    labels: Vec<Label>,
}

impl Term {
    fn size(&self, l: Label) -> i64 {
        let i = self.labels.iter().position(|&x| x == l).unwrap_or(0);
        self.t.shape()[i]
    }

    /// Sums out the labels `drop`.
    fn sum_out(self, drop: &[Label], keep_dtype: bool) -> Result<Term> {
        let dims: Vec<i64> = (0..self.labels.len())
            .filter(|&i| drop.contains(&self.labels[i]))
            .map(|i| i as i64)
            .collect();
        if dims.is_empty() {
            return Ok(self);
        }
        let dtype = self.t.dtype();
        let mut t = crate::sum(&self.t, Some(&dims), false)?;
        if keep_dtype && t.dtype() != dtype {
            // A sum promotes integers to i64, as torch's einsum leaves it; ONNX keeps the
            // operands' type.
            t = crate::to(&t, dtype)?;
        }
        let labels = self
            .labels
            .into_iter()
            .filter(|l| !drop.contains(l))
            .collect();
        Ok(Term { t, labels })
    }

    /// The operand with its dims in the order `want` (a permutation of its labels).
    fn permuted(self, want: &[Label]) -> Result<Term> {
        let perm: Vec<i64> = want
            .iter()
            .map(|l| self.labels.iter().position(|x| x == l).unwrap_or(0) as i64)
            .collect();
        if perm.iter().enumerate().all(|(i, &p)| i as i64 == p) {
            return Ok(Term {
                t: self.t,
                labels: want.to_vec(),
            });
        }
        Ok(Term {
            t: crate::permute(&self.t, &perm)?,
            labels: want.to_vec(),
        })
    }
}

/// `a` times `b`, keeping the labels in `keep` (needed later or in the output).
fn contract(a: Term, b: Term, keep: &[Label], keep_dtype: bool) -> Result<Term, EinsumError> {
    let in_b = |l: &Label| b.labels.contains(l);
    let in_a = |l: &Label| a.labels.contains(l);
    let a_only_drop: Vec<Label> = a
        .labels
        .iter()
        .filter(|l| !in_b(l) && !keep.contains(l))
        .copied()
        .collect();
    let b_only_drop: Vec<Label> = b
        .labels
        .iter()
        .filter(|l| !in_a(l) && !keep.contains(l))
        .copied()
        .collect();
    let (a, b) = (
        a.sum_out(&a_only_drop, keep_dtype)?,
        b.sum_out(&b_only_drop, keep_dtype)?,
    );
    let batch: Vec<Label> = a
        .labels
        .iter()
        .filter(|l| b.labels.contains(l) && keep.contains(l))
        .copied()
        .collect();
    let red: Vec<Label> = a
        .labels
        .iter()
        .filter(|l| b.labels.contains(l) && !keep.contains(l))
        .copied()
        .collect();
    let m: Vec<Label> = a
        .labels
        .iter()
        .filter(|l| !b.labels.contains(l))
        .copied()
        .collect();
    let n: Vec<Label> = b
        .labels
        .iter()
        .filter(|l| !a.labels.contains(l))
        .copied()
        .collect();
    for &l in batch.iter().chain(&red) {
        if a.size(l) != b.size(l) {
            return Err(EinsumError::unsupported(format!(
                "label `{}` is {} in one operand and {} in the other (broadcasting a label)",
                label_name(l),
                a.size(l),
                b.size(l)
            )));
        }
    }
    let sizes = |t: &Term, ls: &[Label]| -> Vec<i64> { ls.iter().map(|&l| t.size(l)).collect() };
    let prod = |v: &[i64]| v.iter().product::<i64>();
    let (bs, ms, ks, ns) = (
        sizes(&a, &batch),
        sizes(&a, &m),
        sizes(&a, &red),
        sizes(&b, &n),
    );
    let a = a.permuted(&[batch.clone(), m.clone(), red.clone()].concat())?;
    let b = b.permuted(&[batch.clone(), red.clone(), n.clone()].concat())?;
    let with = |tail: &[i64]| [bs.clone(), tail.to_vec()].concat();
    let am = crate::reshape(&a.t, &with(&[prod(&ms), prod(&ks)]))?;
    let bm = crate::reshape(&b.t, &with(&[prod(&ks), prod(&ns)]))?;
    let y = crate::matmul(&am, &bm)?;
    let y = crate::reshape(&y, &[bs.clone(), ms, ns].concat())?;
    Ok(Term {
        t: y,
        labels: [batch, m, n].concat(),
    })
}

fn label_name(l: Label) -> String {
    if l >= 256 {
        format!("...[{}]", l - 256)
    } else {
        char::from_u32(l).map_or_else(|| l.to_string(), String::from)
    }
}

/// `einsum(equation, operands)` for the supported forms. Integer sums promote to i64 as in
/// torch, unless `keep_dtype` (ONNX) casts them back to the operands' type.
pub fn einsum_of(
    equation: &str,
    operands: &[Tensor],
    keep_dtype: bool,
) -> std::result::Result<Tensor, EinsumError> {
    let eq: String = equation.chars().filter(|c| !c.is_whitespace()).collect();
    if eq.is_empty() {
        return Err(EinsumError::invalid("the equation is empty"));
    }
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l.to_string(), Some(r.to_string())),
        None => (eq.clone(), None),
    };
    let terms: Vec<&str> = lhs.split(',').collect();
    if terms.len() != operands.len() {
        return Err(EinsumError::invalid(format!(
            "equation `{eq}` has {} operands, {} were given",
            terms.len(),
            operands.len()
        )));
    }
    let mut ops = Vec::new();
    let mut ellipsis_rank = 0;
    for (term, t) in terms.iter().zip(operands) {
        let labels = expand_term(term, Some(t.rank()))
            .map_err(|m| EinsumError::invalid(format!("equation `{eq}`: {m}")))?;
        let mut seen = labels.clone();
        seen.sort_unstable();
        seen.dedup();
        if seen.len() != labels.len() {
            return Err(EinsumError::unsupported(format!(
                "equation `{eq}`: a label repeated within operand `{term}` (a diagonal)"
            )));
        }
        ellipsis_rank = ellipsis_rank.max(labels.iter().filter(|&&l| l >= 256).count());
        ops.push(Term {
            t: t.clone(),
            labels,
        });
    }
    // The output's labels: as written, or (implicit form) `...` then the labels used once,
    // in alphabetical order.
    let out: Vec<Label> = match &rhs {
        Some(r) => {
            let rank = r
                .contains("...")
                .then(|| r.replace("...", "").chars().count() + ellipsis_rank);
            expand_term(r, rank)
                .map_err(|m| EinsumError::invalid(format!("equation `{eq}`: {m}")))?
        }
        None => {
            let mut count = std::collections::BTreeMap::new();
            for l in ops.iter().flat_map(|o| &o.labels) {
                *count.entry(*l).or_insert(0) += 1;
            }
            let mut o: Vec<Label> = (0..ellipsis_rank).map(|i| 256 + i as Label).collect();
            o.extend(
                count
                    .iter()
                    .filter(|(&l, &n)| n == 1 && l < 256)
                    .map(|(&l, _)| l),
            );
            o
        }
    };
    for &l in &out {
        if !ops.iter().any(|o| o.labels.contains(&l)) {
            return Err(EinsumError::invalid(format!(
                "equation `{eq}`: output label `{}` is in no operand",
                label_name(l)
            )));
        }
    }
    let mut rest = ops.into_iter();
    let Some(mut acc) = rest.next() else {
        return Err(EinsumError::invalid("einsum needs at least one operand"));
    };
    let later: Vec<Term> = rest.collect();
    for (k, b) in later.iter().enumerate() {
        let mut keep = out.clone();
        keep.extend(later[k + 1..].iter().flat_map(|o| o.labels.iter().copied()));
        let b = Term {
            t: b.t.clone(),
            labels: b.labels.clone(),
        };
        acc = contract(acc, b, &keep, keep_dtype)?;
    }
    let drop: Vec<Label> = acc
        .labels
        .iter()
        .filter(|l| !out.contains(l))
        .copied()
        .collect();
    let acc = acc.sum_out(&drop, keep_dtype)?.permuted(&out)?;
    Ok(acc.t)
}

pub(crate) fn einsum_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    let equation = c.str(0)?.to_string();
    let operands: Vec<Tensor> = (1..c.args.len())
        .map(|i| c.tensor(i))
        .collect::<Result<_>>()?;
    einsum_of(&equation, &operands, false)
        .map(|t| vec![t])
        .map_err(|e| Error::op(c.op, e.message))
}

/// `torch.einsum(equation, *operands)`.
pub fn einsum(equation: &str, operands: &[Tensor]) -> Result<Tensor> {
    let mut args = vec![Arg::Str(equation.to_string())];
    args.extend(operands.iter().map(|t| Arg::Value(t.value())));
    crate::call1("ltorch.einsum", args)
}
