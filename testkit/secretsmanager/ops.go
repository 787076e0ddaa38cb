package secretsmanager

import (
	"encoding/base64"
	"slices"
	"time"
)

// The operations' JSON inputs and outputs: only the members this stand-in
// reads or writes (the SDK ignores members it does not know and does not
// need those it is not sent).

type createIn struct {
	Name               string
	SecretString       *string
	SecretBinary       *string
	ClientRequestToken string
}

type putIn struct {
	SecretId           string
	SecretString       *string
	SecretBinary       *string
	ClientRequestToken string
}

type getIn struct {
	SecretId     string
	VersionId    string
	VersionStage string
}

type writeOut struct {
	ARN           string
	Name          string
	VersionId     string
	VersionStages []string `json:",omitempty"`
}

type getOut struct {
	ARN           string
	Name          string
	VersionId     string
	SecretString  *string `json:",omitempty"`
	SecretBinary  *string `json:",omitempty"`
	VersionStages []string
	CreatedDate   float64
}

func (s *Server) create(in createIn) (any, *apiError) {
	if in.Name == "" {
		return nil, errf("InvalidParameterException", "Name is required")
	}
	bin, aerr := blob(in.SecretBinary)
	if aerr != nil {
		return nil, aerr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if sec := s.secrets[in.Name]; sec != nil {
		if v := sec.tokens[in.ClientRequestToken]; v != nil && in.ClientRequestToken != "" {
			return writeOut{ARN: sec.arn, Name: sec.name, VersionId: v.id}, nil // an SDK retry
		}
		return nil, errf("ResourceExistsException", "The operation failed because the secret %s already exists.", in.Name)
	}
	sec := s.newSecretLocked(in.Name)
	if in.SecretString == nil && bin == nil {
		return writeOut{ARN: sec.arn, Name: sec.name}, nil
	}
	v := sec.addLocked(in.ClientRequestToken, in.SecretString, bin)
	return writeOut{ARN: sec.arn, Name: sec.name, VersionId: v.id}, nil
}

func (s *Server) put(in putIn) (any, *apiError) {
	bin, aerr := blob(in.SecretBinary)
	if aerr != nil {
		return nil, aerr
	}
	if (in.SecretString == nil) == (bin == nil) {
		return nil, errf("InvalidParameterException", "exactly one of SecretString and SecretBinary is required")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sec, aerr := s.findLocked(in.SecretId)
	if aerr != nil {
		return nil, aerr
	}
	if v := sec.tokens[in.ClientRequestToken]; v != nil && in.ClientRequestToken != "" {
		return writeOut{ARN: sec.arn, Name: sec.name, VersionId: v.id, VersionStages: slices.Clone(v.stages)}, nil
	}
	v := sec.addLocked(in.ClientRequestToken, in.SecretString, bin)
	return writeOut{ARN: sec.arn, Name: sec.name, VersionId: v.id, VersionStages: slices.Clone(v.stages)}, nil
}

func (s *Server) get(in getIn) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sec, aerr := s.findLocked(in.SecretId)
	if aerr != nil {
		return nil, aerr
	}
	stage := in.VersionStage
	if stage == "" && in.VersionId == "" {
		stage = StageCurrent
	}
	for _, v := range sec.versions {
		if (in.VersionId == "" || v.id == in.VersionId) && (stage == "" || slices.Contains(v.stages, stage)) {
			out := getOut{ARN: sec.arn, Name: sec.name, VersionId: v.id, SecretString: v.str,
				VersionStages: slices.Clone(v.stages), CreatedDate: epoch(v.created)}
			if v.bin != nil {
				b := base64.StdEncoding.EncodeToString(v.bin)
				out.SecretBinary = &b
			}
			return out, nil
		}
	}
	return nil, errf("ResourceNotFoundException", "Secrets Manager can't find the specified secret value for staging label: %s", stage)
}

// findLocked finds a secret by name or ARN.
func (s *Server) findLocked(id string) (*secret, *apiError) {
	if sec := s.secrets[id]; sec != nil {
		return sec, nil
	}
	if sec := s.byARN[id]; sec != nil {
		return sec, nil
	}
	return nil, errf("ResourceNotFoundException", "Secrets Manager can't find the specified secret.")
}

func (s *Server) newSecretLocked(name string) *secret {
	sec := &secret{name: name, created: time.Now(), tokens: map[string]*version{},
		arn: "arn:aws:secretsmanager:" + Region + ":" + Account + ":secret:" + name + "-" + arnSuffix()}
	s.secrets[name] = sec
	s.byARN[sec.arn] = sec
	return sec
}

// addLocked makes a new AWSCURRENT version; the current one becomes
// AWSPREVIOUS, and a version left with no stage is dropped (Secrets
// Manager deprecates it), which bounds what a secret holds.
func (sec *secret) addLocked(token string, str *string, bin []byte) *version {
	id := token
	if id == "" {
		id = newID()
	}
	v := &version{id: id, bin: bin, stages: []string{StageCurrent}, created: time.Now()}
	if str != nil {
		c := *str
		v.str = &c
	}
	kept := sec.versions[:0]
	for _, old := range sec.versions {
		old.stages = slices.DeleteFunc(old.stages, func(st string) bool { return st == StagePrevious })
		for i, st := range old.stages {
			if st == StageCurrent {
				old.stages[i] = StagePrevious
			}
		}
		if len(old.stages) > 0 {
			kept = append(kept, old)
		} else {
			delete(sec.tokens, old.id)
		}
	}
	sec.versions = append(kept, v)
	sec.tokens[id] = v
	return v
}
