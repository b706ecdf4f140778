use crate::ir::{Arg, Symbol, Value};

/// A symbol applied to arguments, with its outputs and, for composites, the subsymbols its
/// decomposition recorded.
#[derive(Debug, Clone)]
pub struct BoundSymbol {
    pub sym: &'static Symbol,
    pub args: Vec<Arg>,
    pub outputs: Vec<Value>,
    pub subsymbols: Vec<BoundSymbol>,
}

impl BoundSymbol {
    pub fn input_values(&self) -> impl Iterator<Item = Value> + '_ {
        self.args.iter().filter_map(Arg::as_value)
    }

    /// Renames values everywhere in this bound symbol and its subsymbols.
    pub fn remap_values(&mut self, map: &impl Fn(Value) -> Value) {
        for arg in &mut self.args {
            if let Arg::Value(v) = arg {
                *v = map(*v);
            }
        }
        for out in &mut self.outputs {
            *out = map(*out);
        }
        for sub in &mut self.subsymbols {
            sub.remap_values(map);
        }
    }
}
