use crate::ir::{Arg, BoundSymbol, TensorType, Value};

#[derive(Debug, Clone, PartialEq)]
pub struct ValueInfo {
    pub name: String,
    pub ty: TensorType,
}

/// A program: inputs, bound symbols in a topological order, outputs, and the line saying
/// which pass made it. The value table may hold values no bound symbol uses any more.
#[derive(Debug, Clone)]
pub struct Trace {
    pub fn_name: String,
    pub values: Vec<ValueInfo>,
    pub inputs: Vec<Value>,
    pub bsyms: Vec<BoundSymbol>,
    pub outputs: Vec<Value>,
    pub provenance: String,
}

impl Trace {
    pub fn ty(&self, v: Value) -> &TensorType {
        &self.values[v.index()].ty
    }

    pub fn name(&self, v: Value) -> &str {
        &self.values[v.index()].name
    }

    pub fn input_types(&self) -> Vec<TensorType> {
        self.inputs.iter().map(|&v| self.ty(v).clone()).collect()
    }

    pub fn input_names(&self) -> Vec<String> {
        self.inputs
            .iter()
            .map(|&v| self.name(v).to_string())
            .collect()
    }

    /// Number of top-level bound symbols whose symbol is a prim, counting into composites.
    pub fn count_prims(&self) -> usize {
        fn count(b: &BoundSymbol) -> usize {
            if b.sym.is_composite() {
                b.subsymbols.iter().map(count).sum()
            } else {
                1
            }
        }
        self.bsyms.iter().map(count).sum()
    }
}

/// Traces are equal when they compute the same thing with the same names and types: values
/// are compared through their names, so numbering (and dead entries) do not matter.
impl PartialEq for Trace {
    fn eq(&self, other: &Self) -> bool {
        let same_value = |a: Value, b: Value| self.values[a.index()] == other.values[b.index()];
        let same_values = |a: &[Value], b: &[Value]| {
            a.len() == b.len() && a.iter().zip(b).all(|(&x, &y)| same_value(x, y))
        };
        let same_arg = |a: &Arg, b: &Arg| match (a, b) {
            (Arg::Value(x), Arg::Value(y)) => same_value(*x, *y),
            (x, y) => x == y,
        };
        fn same_bsyms(
            a: &[BoundSymbol],
            b: &[BoundSymbol],
            same_arg: &dyn Fn(&Arg, &Arg) -> bool,
            same_values: &dyn Fn(&[Value], &[Value]) -> bool,
        ) -> bool {
            a.len() == b.len()
                && a.iter().zip(b).all(|(x, y)| {
                    x.sym.id == y.sym.id
                        && x.args.len() == y.args.len()
                        && x.args.iter().zip(&y.args).all(|(p, q)| same_arg(p, q))
                        && same_values(&x.outputs, &y.outputs)
                        && same_bsyms(&x.subsymbols, &y.subsymbols, same_arg, same_values)
                })
        }
        self.fn_name == other.fn_name
            && self.provenance == other.provenance
            && same_values(&self.inputs, &other.inputs)
            && same_values(&self.outputs, &other.outputs)
            && same_bsyms(&self.bsyms, &other.bsyms, &same_arg, &same_values)
    }
}
