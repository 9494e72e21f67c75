// ChimeConsole: the operators' and support staff's web console (`chime console`): its accounts,
// sessions and their protections, its pages rendered as HTML with every device string escaped, and
// the routes that tie them to the workers, all pure and driven by an injected clock.
