// String formats CRD schemas may use (apiextensions supported formats, kube-openapi strfmt checks).
// Unknown formats are accepted without checks, as kube-apiserver does.

const checks: Record<string, (s: string) => boolean> = {
  "date-time": (s) =>
    /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/.test(s) &&
    !Number.isNaN(Date.parse(s.replace(" ", "T"))),
  datetime: (s) => checks["date-time"]?.(s) ?? true,
  date: (s) => /^\d{4}-\d{2}-\d{2}$/.test(s) && !Number.isNaN(Date.parse(s)),
  byte: (s) => /^[A-Za-z0-9+/]*={0,2}$/.test(s) && s.length % 4 === 0,
  uuid: (s) => /^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$/i.test(s),
  uuid3: (s) => /^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$/i.test(s),
  uuid4: (s) => /^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$/i.test(s),
  uuid5: (s) => /^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$/i.test(s),
  email: (s) => /^[^@\s]+@[^@\s]+$/.test(s),
  hostname: (s) =>
    s.length <= 255 &&
    /^([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$/.test(s),
  ipv4: (s) => /^((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$/.test(s),
  ipv6: (s) => s.includes(":") && /^[0-9A-Fa-f:.]+$/.test(s) && isIpv6(s),
  cidr: (s) => {
    const [ip, bits, rest] = s.split("/");
    if (ip === undefined || bits === undefined || rest !== undefined || !/^\d+$/.test(bits)) return false;
    if (checks["ipv4"]?.(ip) === true) return Number(bits) <= 32;
    return isIpv6(ip) && Number(bits) <= 128;
  },
  mac: (s) => /^([0-9A-Fa-f]{2}[:-]){5}[0-9A-Fa-f]{2}$/.test(s),
  duration: (s) => /^(-?\d+(\.\d+)?(ns|us|µs|ms|s|m|h|d|w))+$/.test(s),
  uri: (s) => {
    try {
      new URL(s);
      return true;
    } catch {
      return false;
    }
  },
};

function isIpv6(s: string): boolean {
  try {
    new URL(`http://[${s}]/`);
    return true;
  } catch {
    return false;
  }
}

/** true when the string satisfies the format (or the format is not checked). */
export function checkFormat(format: string, value: string): boolean {
  const check = checks[format];
  return check === undefined ? true : check(value);
}
