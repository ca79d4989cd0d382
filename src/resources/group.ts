// The API group and version of every mds custom resource. Changing either is a breaking change for users.
export const group = "mds.dev";
export const version = "v1alpha1";
export const apiVersion = `${group}/${version}`;
