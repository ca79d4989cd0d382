import { describe, expect, it } from "vitest";
import { createHash } from "node:crypto";
import { credentialsHash, type ConnectionCredentials } from "./connection-credentials.ts";
import { buildSecret, credentialsFromSecret, decodeData, secretData, serviceBindingType } from "./render.ts";

const creds: ConnectionCredentials = {
  connectionId: "con_1",
  connectionName: "c",
  user: "u@x",
  password: "p:/w?d",
  database: "db1",
  sslmode: "require",
  direct: { host: "h", port: 5432 },
  pooled: { host: "pool", port: 6432 },
};

describe("connection Secret", () => {
  it("has the fixed keys, percent-encodes credentials, and evaluates only fixed template variables", () => {
    const data = secretData(creds, {
      endpoint: "pooled",
      template: {
        JDBC_URL: "jdbc:postgresql://{{host}}:{{port}}/{{database}}?user={{user}}",
        DATABASE_URL: "override",
      },
    });
    expect(data["DATABASE_URL"]).toBe("postgresql://u%40x:p%3A%2Fw%3Fd@pool:6432/db1?sslmode=require");
    expect(data["DIRECT_URL"]).toBe("postgresql://u%40x:p%3A%2Fw%3Fd@h:5432/db1?sslmode=require");
    expect(data["JDBC_URL"]).toBe("jdbc:postgresql://h:5432/db1?user=u@x");
    expect(new URL(data["DATABASE_URL"]!).password).toBe("p%3A%2Fw%3Fd");
    expect(secretData(creds, { endpoint: "direct" })["DATABASE_URL"]).toBe(data["DIRECT_URL"]);
  });

  it("never takes mds.dev/ keys from the spec's labels and annotations: those are the operator's records", () => {
    const spec = {
      labels: { team: "a", "mds.dev/connection-id": "con_victim" },
      annotations: { note: "x", "mds.dev/revoke": "con_victim", "mds.dev/restores": '["k"]' },
    };
    const s = buildSecret({
      namespace: "n",
      name: "s",
      credentials: creds,
      spec,
      projectId: undefined,
      databaseId: "db_1",
      owner: undefined,
    });
    expect(s.metadata.labels?.["team"]).toBe("a");
    expect(s.metadata.labels?.["mds.dev/connection-id"]).toBe("con_1");
    expect(s.metadata.annotations?.["note"]).toBe("x");
    expect(s.metadata.annotations?.["mds.dev/revoke"]).toBeUndefined();
    expect(s.metadata.annotations?.["mds.dev/restores"]).toBeUndefined();
  });

  it("reads back only credentials it wrote itself (credentials hash)", () => {
    const s = buildSecret({
      namespace: "n",
      name: "s",
      credentials: creds,
      spec: undefined,
      projectId: "proj_1",
      databaseId: "db_1",
      owner: undefined,
    });
    expect(s.metadata.labels).toMatchObject({
      "mds.dev/database-id": "db_1",
      "mds.dev/connection-id": "con_1",
      "app.kubernetes.io/managed-by": "mds-operator",
    });
    expect(credentialsFromSecret(s, { direct: creds.direct })?.password).toBe(creds.password);
    const edited = { ...s, data: { ...s.data, PGPASSWORD: Buffer.from("other").toString("base64") } };
    expect(credentialsFromSecret(edited, { direct: creds.direct })).toBeUndefined();
    expect(decodeData(s)["PGUSER"]).toBe("u@x");
  });

  it("publishes the servicebinding.io form when asked: its type and well-known keys beside ours", () => {
    const s = buildSecret({
      namespace: "n",
      name: "s",
      credentials: creds,
      spec: { serviceBinding: true },
      projectId: "proj_1",
      databaseId: "db_1",
      owner: undefined,
    });
    expect(s.type).toBe(serviceBindingType);
    expect(decodeData(s)).toMatchObject({
      type: "postgresql",
      provider: "mds",
      host: "h",
      port: "5432",
      database: "db1",
      username: "u@x",
      password: "p:/w?d",
      sslmode: "require",
      PGUSER: "u@x",
    });
    expect(
      buildSecret({
        namespace: "n",
        name: "s",
        credentials: creds,
        spec: {},
        projectId: "proj_1",
        databaseId: "db_1",
        owner: undefined,
      }).type,
    ).toBe("Opaque");
  });

  it("carries the accelerate endpoint as ACCELERATE_URL, for DATABASE_URL when chosen, and reads it back", () => {
    const accel = { ...creds, accelerateUrl: "prisma+postgres://accelerate.example/?api_key=k3y" };
    expect(secretData(accel, { endpoint: "accelerate", template: { A: "{{accelerateUrl}}" } })).toMatchObject({
      DATABASE_URL: accel.accelerateUrl,
      ACCELERATE_URL: accel.accelerateUrl,
      A: accel.accelerateUrl,
    });
    // Without an accelerate endpoint, accelerate falls back to pooled and the key is absent.
    const plain = secretData(creds, { endpoint: "accelerate" });
    expect(plain["DATABASE_URL"]).toContain("@pool:6432/");
    expect(plain).not.toHaveProperty("ACCELERATE_URL");
    const s = buildSecret({
      namespace: "n",
      name: "s",
      credentials: accel,
      spec: undefined,
      projectId: undefined,
      databaseId: "db_1",
      owner: undefined,
    });
    expect(credentialsFromSecret(s, { direct: creds.direct })?.accelerateUrl).toBe(accel.accelerateUrl);
    const edited = {
      ...s,
      data: { ...s.data, ACCELERATE_URL: Buffer.from("prisma+postgres://evil/").toString("base64") },
    };
    expect(credentialsFromSecret(edited, { direct: creds.direct })).toBeUndefined();
  });

  it("hashes credentials without an accelerate endpoint as before, so existing Secrets stay valid", () => {
    const old = createHash("sha256").update("con_1\u0000u\u0000p").digest("hex");
    expect(credentialsHash("con_1", "u", "p")).toBe(old);
  });

  it("carries the service's sslrootcert into the URLs and PGSSLROOTCERT, and reads it back", () => {
    const withCa = { ...creds, sslrootcert: "/srv/mds/ca.crt" };
    const data = secretData(withCa, undefined);
    expect(new URL(data["DATABASE_URL"]!).searchParams.get("sslrootcert")).toBe("/srv/mds/ca.crt");
    expect(data["PGSSLROOTCERT"]).toBe("/srv/mds/ca.crt");
    const s = buildSecret({
      namespace: "n",
      name: "s",
      credentials: withCa,
      spec: undefined,
      projectId: undefined,
      databaseId: "db_1",
      owner: undefined,
    });
    expect(credentialsFromSecret(s, { direct: creds.direct })?.sslrootcert).toBe("/srv/mds/ca.crt");
    expect(secretData(creds, undefined)).not.toHaveProperty("PGSSLROOTCERT");
  });

  it("with spec.tls carries the CA as ca.crt and verifies the server with it at the mount path; without it again, TLS stays required", () => {
    const pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
    const spec = { tls: { caCert: pem, mountPath: "/var/run/db/ca.crt" } };
    const data = secretData({ ...creds, sslrootcert: "/srv/mds/ca.crt" }, spec);
    expect(data["ca.crt"]).toBe(pem);
    expect([data["PGSSLMODE"], data["PGSSLROOTCERT"]]).toEqual(["verify-full", "/var/run/db/ca.crt"]);
    for (const key of ["DATABASE_URL", "DIRECT_URL"]) {
      const u = new URL(data[key]!);
      expect([u.searchParams.get("sslmode"), u.searchParams.get("sslrootcert")]).toEqual([
        "verify-full",
        "/var/run/db/ca.crt",
      ]);
    }
    const s = buildSecret({
      namespace: "n",
      name: "s",
      credentials: creds,
      spec,
      projectId: undefined,
      databaseId: "db_1",
      owner: undefined,
    });
    const back = credentialsFromSecret(s, { direct: creds.direct, pooled: creds.pooled })!;
    // Read back and written again with the same spec: the same data (no rewrite loop).
    expect(secretData(back, spec)).toEqual(secretData(creds, spec));
    expect(secretData(back, undefined)["PGSSLMODE"]).toBe("require");
    expect(secretData(back, undefined)).not.toHaveProperty("ca.crt");
  });
});
