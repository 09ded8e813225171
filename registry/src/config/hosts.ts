/**
 * The grammar of a trusted host in `upstream_hosts`: a host name, `*.` and a host name (every
 * name below it), or an IP address. The config schema checks each entry with it; what a trusted
 * host then means for a connection is roles/egress.ts's business.
 */
export const HOST_PATTERN = /^(\*\.)?([a-z0-9]([a-z0-9-]*[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]*[a-z0-9])?$|^\[?[0-9a-f:.]+\]?$/;
