// The Kubernetes operator lands in a later issue; this workspace exists so the layout and the
// build are in place from the start.
export const operatorName = 'velodex-operator';
