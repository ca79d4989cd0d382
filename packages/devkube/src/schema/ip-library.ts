// The Kubernetes CEL ip and cidr libraries (k8s.io/apiserver/pkg/cel/library/ip.go, cidr.go):
// IPv4/IPv6 addresses and prefixes as 32/128-bit integers; IPv4-mapped IPv6 and zones are rejected.
import type { Environment } from "@marcbachmann/cel-js";
import { isIPv4, isIPv6 } from "node:net";

class CelIp {
  readonly family: 4 | 6;
  readonly value: bigint;
  constructor(family: 4 | 6, value: bigint) {
    this.family = family;
    this.value = value;
  }
  get bits(): number {
    return this.family === 4 ? 32 : 128;
  }
}

class CelCidr {
  readonly ip: CelIp;
  readonly prefix: number;
  constructor(ip: CelIp, prefix: number) {
    this.ip = ip;
    this.prefix = prefix;
  }
  masked(): CelCidr {
    const shift = BigInt(this.ip.bits - this.prefix);
    return new CelCidr(new CelIp(this.ip.family, (this.ip.value >> shift) << shift), this.prefix);
  }
  contains(ip: CelIp): boolean {
    if (ip.family !== this.ip.family) return false;
    const shift = BigInt(this.ip.bits - this.prefix);
    return ip.value >> shift === this.ip.value >> shift;
  }
}

function parseIp(s: string): CelIp | undefined {
  if (isIPv4(s)) {
    // Go's netip rejects leading zeros
    if (s.split(".").some((p) => p.length > 1 && p.startsWith("0"))) return undefined;
    return new CelIp(
      4,
      s.split(".").reduce((acc, p) => (acc << 8n) | BigInt(Number(p)), 0n),
    );
  }
  if (!isIPv6(s) || s.includes("%") || s.includes(".")) return undefined; // zones and IPv4-mapped forms are rejected
  const [head = "", tail] = s.split("::");
  const h = head === "" ? [] : head.split(":");
  const t = tail === undefined || tail === "" ? [] : tail.split(":");
  const groups = tail === undefined ? h : [...h, ...Array<string>(8 - h.length - t.length).fill("0"), ...t];
  return new CelIp(
    6,
    groups.reduce((acc, g) => (acc << 16n) | BigInt(parseInt(g, 16)), 0n),
  );
}

function parseCidr(s: string): CelCidr | undefined {
  const [addr, bits, extra] = s.split("/");
  if (addr === undefined || bits === undefined || extra !== undefined || !/^\d{1,3}$/.test(bits)) return undefined;
  const ip = parseIp(addr);
  if (ip === undefined || Number(bits) > ip.bits) return undefined;
  return new CelCidr(ip, Number(bits));
}

function ipOf(s: string): CelIp {
  const ip = parseIp(s);
  if (ip === undefined)
    throw new Error(
      `IP Address ${JSON.stringify(s)} parse error during conversion from string: ParseAddr(${JSON.stringify(s)}): unable to parse IP`,
    );
  return ip;
}

function cidrOf(s: string): CelCidr {
  const c = parseCidr(s);
  if (c === undefined)
    throw new Error(
      `network address parse error during conversion from string: network address parse error during conversion from string: netip.ParsePrefix(${JSON.stringify(s)}): bad prefix`,
    );
  return c;
}

export function registerIpLibraries(env: Environment): void {
  env.registerType("IP", CelIp);
  env.registerType("CIDR", CelCidr);
  env.registerFunction("isIP(string): bool", (s: string) => parseIp(s) !== undefined);
  env.registerFunction("ip(string): IP", ipOf);
  env.registerFunction("IP.family(): int", (ip: CelIp) => BigInt(ip.family));
  env.registerFunction("IP.isUnspecified(): bool", (ip: CelIp) => ip.value === 0n);
  env.registerFunction("IP.isLoopback(): bool", (ip: CelIp) =>
    ip.family === 4 ? ip.value >> 24n === 127n : ip.value === 1n,
  );
  env.registerFunction("IP.isLinkLocalMulticast(): bool", (ip: CelIp) =>
    ip.family === 4 ? ip.value >> 8n === 0xe00000n : ip.value >> 112n === 0xff02n,
  );
  env.registerFunction("IP.isLinkLocalUnicast(): bool", (ip: CelIp) =>
    ip.family === 4 ? ip.value >> 16n === 0xa9fen : ip.value >> 118n === 0x3fan,
  );
  env.registerFunction("IP.isGlobalUnicast(): bool", (ip: CelIp) => {
    if (ip.family === 4)
      return (
        ip.value !== 0n &&
        ip.value !== 0xffffffffn &&
        ip.value >> 24n !== 127n &&
        ip.value >> 28n !== 0xen &&
        ip.value >> 16n !== 0xa9fen
      );
    return ip.value !== 0n && ip.value !== 1n && ip.value >> 120n !== 0xffn && ip.value >> 118n !== 0x3fan;
  });
  env.registerOperator("IP == IP", (a: CelIp, b: CelIp) => a.family === b.family && a.value === b.value);
  env.registerFunction("isCIDR(string): bool", (s: string) => parseCidr(s) !== undefined);
  env.registerFunction("cidr(string): CIDR", cidrOf);
  env.registerFunction("CIDR.containsIP(IP): bool", (c: CelCidr, ip: CelIp) => c.contains(ip));
  env.registerFunction("CIDR.containsIP(string): bool", (c: CelCidr, s: string) => c.contains(ipOf(s)));
  env.registerFunction(
    "CIDR.containsCIDR(CIDR): bool",
    (c: CelCidr, o: CelCidr) => o.prefix >= c.prefix && c.contains(o.ip),
  );
  env.registerFunction("CIDR.containsCIDR(string): bool", (c: CelCidr, s: string) => {
    const o = cidrOf(s);
    return o.prefix >= c.prefix && c.contains(o.ip);
  });
  env.registerFunction("CIDR.ip(): IP", (c: CelCidr) => c.ip);
  env.registerFunction("CIDR.masked(): CIDR", (c: CelCidr) => c.masked());
  env.registerFunction("CIDR.prefixLength(): int", (c: CelCidr) => BigInt(c.prefix));
  env.registerOperator(
    "CIDR == CIDR",
    (a: CelCidr, b: CelCidr) => a.prefix === b.prefix && a.ip.family === b.ip.family && a.ip.value === b.ip.value,
  );
}
