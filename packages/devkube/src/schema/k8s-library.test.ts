import { describe, expect, it } from "vitest";
import { compileCel } from "./cel.ts";

const run = (expr: string, self: unknown = null): unknown => compileCel(expr, "bool").evaluate({ self, oldSelf: null });

describe("Kubernetes CEL libraries", () => {
  it.each([
    // lists
    "[1, 2, 2, 3].isSorted()",
    "!['b', 'a'].isSorted()",
    "[1, 2, 3].sum() == 6",
    "[1.5, 2.5].sum() == 4.0",
    "[3, 1, 2].min() == 1 && [3, 1, 2].max() == 3",
    "['a', 'b', 'a'].indexOf('a') == 0 && ['a', 'b', 'a'].lastIndexOf('a') == 2",
    // regex and strings
    "'abc 123'.find('[0-9]+') == '123'",
    "'a1b22'.findAll('[0-9]+') == ['1', '22']",
    "'a1b22c3'.findAll('[0-9]+', 2) == ['1', '22']",
    "'hello'.charAt(1) == 'e'",
    "'a-b-c'.replace('-', '+') == 'a+b+c' && 'a-b-c'.replace('-', '+', 1) == 'a+b-c'",
    "'abc'.reverse() == 'cba'",
    "'AbC'.lowerAscii() == 'abc' && 'abc'.upperAscii() == 'ABC'",
    "'a,b'.split(',') == ['a', 'b'] && ['a', 'b'].join('-') == 'a-b'",
    "'  x '.trim() == 'x' && 'abc'.substring(1) == 'bc' && 'abc'.indexOf('c') == 2",
    // sets
    "sets.contains([1, 2, 3], [1, 3]) && !sets.contains([1], [2])",
    "sets.equivalent([1, 2], [2, 1, 1]) && sets.intersects([1, 2], [2, 5])",
    // quantity
    "quantity('1Gi').isGreaterThan(quantity('1000Mi'))",
    "quantity('500m').isLessThan(quantity('1'))",
    "quantity('1k').compareTo(quantity('1000')) == 0",
    "quantity('1k') == quantity('1000') && quantity('1Ki') != quantity('1k')",
    "quantity('1.5Gi').add(quantity('512Mi')).compareTo(quantity('2Gi')) == 0",
    "quantity('10').sub(3).asInteger() == 7",
    "quantity('1e3').asInteger() == 1000 && quantity('100m').asApproximateFloat() == 0.1",
    "quantity('-1').sign() == -1 && !quantity('0.5').isInteger()",
    "isQuantity('10Gi') && !isQuantity('10 Gi') && !isQuantity('1GB')",
    // url
    "url('https://example.com:8443/a/b?x=1&x=2').getHost() == 'example.com:8443'",
    "url('https://example.com:8443/a').getHostname() == 'example.com' && url('https://example.com:8443/a').getPort() == '8443'",
    "url('https://example.com/a%20b').getEscapedPath() == '/a%20b' && url('https://e.com').getScheme() == 'https'",
    "url('https://e.com/?x=1&x=2').getQuery()['x'] == ['1', '2']",
    "isURL('https://e.com') && isURL('/just/a/path') && !isURL('e.com')",
    // ip and cidr
    "isIP('10.0.0.1') && isIP('fd00::1') && !isIP('10.0.0.256') && !isIP('010.0.0.1') && !isIP('::ffff:1.2.3.4')",
    "ip('10.0.0.1').family() == 4 && ip('::1').family() == 6 && ip('::1').isLoopback() && ip('127.0.0.2').isLoopback()",
    "ip('0.0.0.0').isUnspecified() && ip('169.254.1.1').isLinkLocalUnicast() && ip('8.8.8.8').isGlobalUnicast()",
    "ip('10.0.0.1') == ip('10.0.0.1')",
    "isCIDR('10.0.0.0/8') && !isCIDR('10.0.0.0/33') && !isCIDR('10.0.0.0')",
    "cidr('10.0.0.0/8').containsIP(ip('10.1.2.3')) && cidr('10.0.0.0/8').containsIP('10.9.9.9') && !cidr('10.0.0.0/8').containsIP('11.0.0.1')",
    "cidr('10.0.0.0/8').containsCIDR('10.1.0.0/16') && !cidr('10.1.0.0/16').containsCIDR('10.0.0.0/8')",
    "cidr('fd00::/8').containsIP('fd12:3456::1') && !cidr('fd00::/8').containsIP('10.0.0.1')",
    "cidr('10.1.2.3/8').masked() == cidr('10.0.0.0/8') && cidr('10.1.2.3/8').prefixLength() == 8 && cidr('10.1.2.3/8').ip() == ip('10.1.2.3')",
  ])("%s", (expr) => {
    expect(run(expr)).toBe(true);
  });

  it("quantity() of a malformed string is a runtime error", () => {
    expect(() => run("quantity(self) == quantity('1')", "1 GB")).toThrow(/quantities must match/);
  });

  it("self is typed from the schema: a quantity string field works with quantity()", () => {
    expect(run("quantity(self).isGreaterThan(quantity('1Gi'))", "10Gi")).toBe(true);
  });
});
